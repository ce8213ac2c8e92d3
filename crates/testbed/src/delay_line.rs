//! The pure part of the delay element (`slipstream-delay`): a FIFO line that holds each item
//! for a one-way delay, whose delay may change while items are held, and the control file that
//! changes it at run time.
//!
//! Why it exists: the lab's `link` scenario steps the base RTT mid-run (a route change). A new
//! delay applies to the items pushed after the change; items already held keep their due time,
//! and nothing is reordered: after the delay falls, a new item waits until the items before it
//! have left (its due time is at least theirs), as packets behind a longer path would.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// A FIFO of items, each released at its due time: the time it was pushed plus the delay in
/// force then, but never before the item pushed before it.
#[derive(Debug)]
pub struct DelayLine<T> {
    delay: Duration,
    held: VecDeque<(Instant, T)>,
}

impl<T> DelayLine<T> {
    /// An empty line holding items for `delay`.
    pub fn new(delay: Duration) -> DelayLine<T> {
        DelayLine {
            delay,
            held: VecDeque::new(),
        }
    }

    /// The delay applied to the next item pushed.
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// Changes the delay of the items pushed from now on (held ones keep their due times).
    pub fn set_delay(&mut self, delay: Duration) {
        self.delay = delay;
    }

    /// Holds `item`, pushed at `now`; returns its due time.
    pub fn push(&mut self, now: Instant, item: T) -> Instant {
        let own = now + self.delay;
        let due = self.held.back().map_or(own, |(last, _)| own.max(*last));
        self.held.push_back((due, item));
        due
    }

    /// The oldest item if it is due at `now`, with its due time.
    pub fn pop_due(&mut self, now: Instant) -> Option<(Instant, T)> {
        if self.held.front().is_some_and(|(due, _)| *due <= now) {
            self.held.pop_front()
        } else {
            None
        }
    }

    /// When the oldest item is due (no later item is due before it).
    pub fn next_due(&self) -> Option<Instant> {
        self.held.front().map(|(due, _)| *due)
    }

    /// Items held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    /// Whether no item is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Takes every held item, oldest first (at shutdown).
    pub fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.held.drain(..).map(|(_, item)| item)
    }
}

/// A delay in milliseconds (fractions allowed) as a [`Duration`]; finite and non-negative.
pub fn delay_from_ms(ms: f64) -> Result<Duration> {
    if !ms.is_finite() || ms < 0.0 {
        bail!("delay must be a finite non-negative number of milliseconds, got {ms}");
    }
    Ok(Duration::from_secs_f64(ms / 1000.0))
}

/// New delays from a control file's text: its first line that is neither empty nor a `#`
/// comment, `DELAY_MS [DELAY2_MS]` (milliseconds, fractions allowed): the delay of the first
/// queue and, if given, of the second.
pub fn parse_control(text: &str) -> Result<(Duration, Option<Duration>)> {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .context("no delay in the control file")?;
    let mut fields = line.split_whitespace();
    let mut next = |what: &str| -> Result<Option<Duration>> {
        fields
            .next()
            .map(|f| {
                let ms: f64 = f
                    .parse()
                    .with_context(|| format!("{what}: {f:?} is not a number"))?;
                delay_from_ms(ms).with_context(|| what.to_string())
            })
            .transpose()
    };
    let first = next("first delay")?.context("no delay in the control file")?;
    let second = next("second delay")?;
    if fields.next().is_some() {
        bail!("control line {line:?}: expected DELAY_MS [DELAY2_MS]");
    }
    Ok((first, second))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn holds_each_item_for_the_delay_in_order() {
        let t0 = Instant::now();
        let mut line = DelayLine::new(ms(50));
        assert_eq!(line.push(t0, 1), t0 + ms(50));
        assert_eq!(line.push(t0 + ms(10), 2), t0 + ms(60));
        assert_eq!(line.next_due(), Some(t0 + ms(50)));
        assert!(line.pop_due(t0 + ms(49)).is_none());
        assert_eq!(line.pop_due(t0 + ms(55)), Some((t0 + ms(50), 1)));
        assert!(line.pop_due(t0 + ms(55)).is_none());
        assert_eq!(line.pop_due(t0 + ms(60)).map(|(_, i)| i), Some(2));
        assert!(line.is_empty() && line.next_due().is_none());
    }

    #[test]
    fn a_new_delay_applies_to_items_pushed_after_it() {
        let t0 = Instant::now();
        let mut line = DelayLine::new(ms(50));
        line.push(t0, 1);
        line.set_delay(ms(65));
        assert_eq!(line.delay(), ms(65));
        assert_eq!(line.push(t0 + ms(1), 2), t0 + ms(66));
        // The held item keeps its due time.
        assert_eq!(line.pop_due(t0 + ms(50)), Some((t0 + ms(50), 1)));
        assert!(line.pop_due(t0 + ms(65)).is_none());
        assert_eq!(line.pop_due(t0 + ms(66)).map(|(_, i)| i), Some(2));
    }

    #[test]
    fn a_shorter_delay_never_overtakes_held_items() {
        let t0 = Instant::now();
        let mut line = DelayLine::new(ms(65));
        line.push(t0, 1);
        line.set_delay(ms(50));
        // Pushed 5 ms later with 50 ms: 55 ms on its own, but item 1 leaves at 65.
        assert_eq!(line.push(t0 + ms(5), 2), t0 + ms(65));
        // Pushed 20 ms later: 70 ms, after item 1 anyway.
        assert_eq!(line.push(t0 + ms(20), 3), t0 + ms(70));
        assert!(line.pop_due(t0 + ms(60)).is_none(), "nothing overtakes item 1");
        let out: Vec<i32> = std::iter::from_fn(|| line.pop_due(t0 + ms(70)).map(|(_, i)| i)).collect();
        assert_eq!(out, [1, 2, 3]);
    }

    #[test]
    fn drain_gives_everything_oldest_first() {
        let t0 = Instant::now();
        let mut line = DelayLine::new(ms(50));
        for i in 0..3 {
            line.push(t0, i);
        }
        assert_eq!(line.len(), 3);
        assert_eq!(line.drain().collect::<Vec<_>>(), [0, 1, 2]);
        assert!(line.is_empty());
    }

    #[test]
    fn control_lines() {
        assert_eq!(parse_control("65 65\n").unwrap(), (ms(65), Some(ms(65))));
        assert_eq!(
            parse_control("# route change\n\n  57.5\n").unwrap(),
            (Duration::from_micros(57_500), None)
        );
        assert_eq!(parse_control("0").unwrap(), (Duration::ZERO, None));
        for bad in ["", "# only a comment", "x", "50 y", "-1", "50 50 50", "inf"] {
            assert!(parse_control(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn delays_in_ms() {
        assert_eq!(delay_from_ms(50.0).unwrap(), ms(50));
        assert_eq!(delay_from_ms(0.25).unwrap(), Duration::from_micros(250));
        assert!(delay_from_ms(-0.1).is_err() && delay_from_ms(f64::NAN).is_err());
    }
}
