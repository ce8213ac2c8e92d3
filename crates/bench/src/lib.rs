//! Benchmarks of Slipstream's engine, in `benches/` (`cargo bench -p slipstream-bench`): the
//! per-packet path and one flow's memory (`per_packet`), household rounds at 10,000 flows over
//! 200 LAN hosts and the per-packet path beside them (`household_scale`). No library code.
