//! PLACEHOLDER (being written by the lead): splits the budget.

/// What the allocator gives one flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// Advertise at most this many bytes beyond the ACK (the safety rules still apply).
    Window(u32),
    /// Keep the right edge where it is: no new data until the flow's turn comes.
    Hold,
}

/// A flow as the allocator sees it.
#[derive(Clone, Copy, Debug)]
pub struct FlowDemand {}

/// The allocator.
#[derive(Clone, Debug, Default)]
pub struct Allocator {}
