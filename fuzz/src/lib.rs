//! Shared code of Slipstream's fuzz targets (`fuzz_targets/`): a packet builder with an
//! independent TCP checksum (`packet`), the wire targets' properties (`wire_checks`), the engine
//! harness (`engine_run`), and hand-written engine inputs (`scenarios`) with their byte encoding
//! (`encode`). Kept in a library so the seed generator (`examples/gen_seeds.rs`) and the unit
//! tests use exactly what the targets run.

pub mod encode;
pub mod engine_input;
pub mod engine_run;
pub mod packet;
pub mod scenarios;
pub mod wire_checks;
