//! PLACEHOLDER (being written by the lead): the shared view of the link's delay.

/// The shared view of one access link's delay.
#[derive(Clone, Debug, Default)]
pub struct LinkDelay {}
