//! The kinds of a rule's `controller` and of the household `budget`: per kind, its parameters as
//! the file gives them and its validator (see `kinded` for how they are read in both syntaxes).
//! Parameter names are the option names in TOML and UCI alike.

use serde::Deserialize;
use std::time::Duration;

use crate::kinded::{field_names, kinds, Kind};
use crate::{default_vulture, ConfigError, Format, Validator, DEFAULT_QUEUE_DELAY_LIMIT};
use slipstream_control::{ControllerConfig, FixedWindowConfig, VultureConfig};
use slipstream_household::delay_target::DelayTargetVariant;
use slipstream_household::{BudgetConfig, DelayTargetConfig, KeyBinarySearchConfig, KeyStochasticConfig};

type VResult<T> = Result<T, ConfigError>;

kinds! {
    /// A rule's `controller`.
    pub(crate) enum RawController ("controller") -> ControllerConfig {
        "vulture" => Vulture(VultureParams),
        "fixed_window" => FixedWindow(FixedWindowParams),
        "household" => Household(HouseholdParams),
    }
}

kinds! {
    /// The household `budget` controller.
    pub(crate) enum RawBudget ("budget controller") -> BudgetConfig {
        "delay_target" => DelayTarget(DelayTargetParams),
        "key_binary_search" => KeyBinarySearch(KeyBinarySearchParams),
        "key_stochastic" => KeyStochastic(KeyStochasticParams),
    }
}

/// Vulture (Li & Welzl), Slipstream's variant unless `variant = "paper"`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct VultureParams {
    variant: Option<String>,
    queue_delay_limit: Option<String>,
    psi: Option<String>,
    piv_resolution: Option<String>,
    conservative_low: Option<String>,
    conservative_high: Option<String>,
    aggressive_low: Option<String>,
    aggressive_high: Option<String>,
    alpha: Option<f64>,
}

impl Kind for VultureParams {
    type Out = ControllerConfig;

    fn validate(self, v: &Validator, p: &str) -> VResult<ControllerConfig> {
        let d = match self.variant.as_deref() {
            None => default_vulture(),
            Some("slipstream") => VultureConfig::slipstream(DEFAULT_QUEUE_DELAY_LIMIT),
            Some("paper") => VultureConfig::paper(),
            Some(other) => {
                return Err(v.err(
                    format!("{p}.variant"),
                    format!("unknown variant {other:?}, expected \"slipstream\" or \"paper\""),
                ))
            }
        };
        let psi = v.opt_duration(p, "psi", self.psi, d.psi)?;
        let piv_resolution = v.opt_duration(p, "piv_resolution", self.piv_resolution, d.piv_resolution)?;
        let conservative_low =
            v.opt_duration(p, "conservative_low", self.conservative_low, d.conservative_low)?;
        let conservative_high = v.opt_duration(
            p,
            "conservative_high",
            self.conservative_high,
            d.conservative_high,
        )?;
        let aggressive_low = v.opt_duration(p, "aggressive_low", self.aggressive_low, d.aggressive_low)?;
        let aggressive_high =
            v.opt_duration(p, "aggressive_high", self.aggressive_high, d.aggressive_high)?;
        let alpha = self.alpha.unwrap_or(d.alpha);
        let queue_delay_limit = match self.queue_delay_limit.as_deref() {
            None => d.queue_delay_limit,
            Some("off") => None,
            Some(text) => Some(v.duration(&format!("{p}.queue_delay_limit"), Some(text), Duration::ZERO)?),
        };
        if queue_delay_limit.is_some_and(|l| l.is_zero()) {
            return Err(v.err(
                format!("{p}.queue_delay_limit"),
                "must be greater than zero, or \"off\"",
            ));
        }
        let fmt = |d: Duration| humantime::format_duration(d).to_string();
        if psi.is_zero() {
            return Err(v.err(format!("{p}.psi"), "must be greater than zero"));
        }
        if piv_resolution.is_zero() {
            return Err(v.err(format!("{p}.piv_resolution"), "must be greater than zero"));
        }
        if conservative_low >= conservative_high {
            return Err(v.err(
                format!("{p}.conservative_high"),
                format!(
                    "must be greater than conservative_low ({} >= {})",
                    fmt(conservative_low),
                    fmt(conservative_high)
                ),
            ));
        }
        if aggressive_low >= aggressive_high {
            return Err(v.err(
                format!("{p}.aggressive_high"),
                format!(
                    "must be greater than aggressive_low ({} >= {})",
                    fmt(aggressive_low),
                    fmt(aggressive_high)
                ),
            ));
        }
        if !(alpha > 0.5 && alpha <= 1.0) {
            return Err(v.err(format!("{p}.alpha"), format!("{alpha} is outside (0.5, 1.0]")));
        }
        Ok(ControllerConfig::Vulture(VultureConfig {
            psi,
            piv_resolution,
            conservative_low,
            conservative_high,
            aggressive_low,
            aggressive_high,
            alpha,
            queue_delay_limit,
            ..d
        }))
    }
}

/// A constant clamp.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FixedWindowParams {
    window_bytes: Option<i64>,
}

impl Kind for FixedWindowParams {
    type Out = ControllerConfig;

    fn validate(self, v: &Validator, p: &str) -> VResult<ControllerConfig> {
        let path = format!("{p}.window_bytes");
        let Some(n) = self.window_bytes else {
            return Err(v.err(
                path,
                match v.format {
                    Format::Toml => "is required for kind = \"fixed_window\" (e.g. 65535)",
                    Format::Uci => "is required for controller 'fixed_window' (e.g. 65535)",
                },
            ));
        };
        let window_bytes = v.int(&path, Some(n), 0u32, 1, 1 << 30)?;
        Ok(ControllerConfig::FixedWindow(FixedWindowConfig { window_bytes }))
    }
}

/// The flow's share of the household budget: the `[household]` settings and the rule's
/// `weight`, `min_rate` and `priority` say everything, so the controller takes no parameters.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HouseholdParams {}

impl Kind for HouseholdParams {
    type Out = ControllerConfig;

    fn validate(self, _: &Validator, _: &str) -> VResult<ControllerConfig> {
        Ok(ControllerConfig::Household)
    }
}

/// A queueing-delay target at the router (LEDBAT / rLEDBAT); the variant picks the defaults of
/// the others (`ledbat`: RFC 6817's GAIN of 1).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DelayTargetParams {
    variant: Option<String>,
    target: Option<String>,
    gain: Option<f64>,
    max_growth: Option<f64>,
    early_yield: Option<bool>,
    interactive_target: Option<String>,
}

impl Kind for DelayTargetParams {
    type Out = BudgetConfig;

    fn validate(self, v: &Validator, p: &str) -> VResult<BudgetConfig> {
        let d = match self.variant.as_deref() {
            None | Some("proportional") => DelayTargetConfig::default(),
            Some("ledbat") => DelayTargetConfig::ledbat(),
            Some(other) => {
                return Err(v.err(
                    format!("{p}.variant"),
                    format!("unknown variant {other:?}, expected \"proportional\" or \"ledbat\""),
                ))
            }
        };
        if self.max_growth.is_some() && d.variant != DelayTargetVariant::Proportional {
            return Err(v.err(
                format!("{p}.max_growth"),
                "only the proportional variant grows geometrically; variant \"ledbat\" does not use it",
            ));
        }
        // Every field named (no `..d`): a new one fails to compile until it is mapped here.
        let target = v.opt_duration(p, "target", self.target, d.target)?;
        let c = DelayTargetConfig {
            target,
            gain: self.gain.unwrap_or(d.gain),
            max_growth: self.max_growth.unwrap_or(d.max_growth),
            variant: d.variant,
            early_yield: self.early_yield.unwrap_or(d.early_yield),
            interactive_target: v.opt_duration(
                p,
                "interactive_target",
                self.interactive_target,
                d.interactive_target.min(target),
            )?,
        };
        v.checked(p, field_names::<Self>(), c.validate())?;
        Ok(BudgetConfig::DelayTarget(c))
    }
}

/// Key et al. Sec. 4.1: binary search for the change point of rho = R / w. Field names are the
/// library's, so its `validate()` messages land on the right option.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeyBinarySearchParams {
    interval: Option<String>,
    unit_bytes: Option<i64>,
    epsilon_units: Option<f64>,
    epsilon_prime_units: Option<f64>,
    delta: Option<f64>,
    c: Option<f64>,
    max_budget_bytes: Option<i64>,
    anchored_estimate: Option<bool>,
}

impl Kind for KeyBinarySearchParams {
    type Out = BudgetConfig;

    fn validate(self, v: &Validator, p: &str) -> VResult<BudgetConfig> {
        let d = KeyBinarySearchConfig::default();
        let c = KeyBinarySearchConfig {
            interval: v.opt_duration(p, "interval", self.interval, d.interval)?,
            unit_bytes: v.param_int(p, "unit_bytes", self.unit_bytes, d.unit_bytes)?,
            epsilon_units: self.epsilon_units.unwrap_or(d.epsilon_units),
            epsilon_prime_units: self.epsilon_prime_units.unwrap_or(d.epsilon_prime_units),
            delta: self.delta.unwrap_or(d.delta),
            c: self.c.unwrap_or(d.c),
            max_budget_bytes: v.param_int(
                p,
                "max_budget_bytes",
                self.max_budget_bytes,
                d.max_budget_bytes,
            )?,
            anchored_estimate: self.anchored_estimate.unwrap_or(d.anchored_estimate),
        };
        v.checked(p, field_names::<Self>(), c.validate())?;
        Ok(BudgetConfig::KeyBinarySearch(c))
    }
}

/// Key et al. Sec. 4.2: stochastic approximation (eq. 31). Field names are the library's.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeyStochasticParams {
    interval: Option<String>,
    unit_bytes: Option<i64>,
    epsilon_units: Option<f64>,
    epsilon_prime_units: Option<f64>,
    delta: Option<f64>,
    gamma: Option<f64>,
    max_budget_bytes: Option<i64>,
    anchored_estimate: Option<bool>,
}

impl Kind for KeyStochasticParams {
    type Out = BudgetConfig;

    fn validate(self, v: &Validator, p: &str) -> VResult<BudgetConfig> {
        let d = KeyStochasticConfig::default();
        let c = KeyStochasticConfig {
            interval: v.opt_duration(p, "interval", self.interval, d.interval)?,
            unit_bytes: v.param_int(p, "unit_bytes", self.unit_bytes, d.unit_bytes)?,
            epsilon_units: self.epsilon_units.unwrap_or(d.epsilon_units),
            epsilon_prime_units: self.epsilon_prime_units.unwrap_or(d.epsilon_prime_units),
            delta: self.delta.unwrap_or(d.delta),
            gamma: self.gamma.unwrap_or(d.gamma),
            max_budget_bytes: v.param_int(
                p,
                "max_budget_bytes",
                self.max_budget_bytes,
                d.max_budget_bytes,
            )?,
            anchored_estimate: self.anchored_estimate.unwrap_or(d.anchored_estimate),
        };
        v.checked(p, field_names::<Self>(), c.validate())?;
        Ok(BudgetConfig::KeyStochastic(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::default_controller;
    use crate::kinded::{Kinded, Kinds};

    fn build<E: Kinds>(kind: &str) -> E::Out {
        let v = Validator {
            origin: "t",
            format: Format::Toml,
        };
        Kinded::<E>::build(kind, Vec::<(String, toml::Value)>::new())
            .validate(&v, "x")
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A rule without `controller` and one naming the default's kind mean the same (UCI
    /// parameters without `option controller` rely on it).
    #[test]
    fn defaults_are_their_kind_without_parameters() {
        assert_eq!(
            build::<RawController>(default_controller().kind()),
            default_controller()
        );
        assert_eq!(
            build::<RawBudget>(BudgetConfig::default().kind()),
            BudgetConfig::default()
        );
    }

    #[test]
    fn parameter_names_come_from_the_structs() {
        assert_eq!(RawController::fields("fixed_window"), ["window_bytes"]);
        assert!(RawController::fields("household").is_empty());
        assert_eq!(
            RawBudget::all_fields(),
            [
                "variant",
                "target",
                "gain",
                "max_growth",
                "early_yield",
                "interactive_target",
                "interval",
                "unit_bytes",
                "epsilon_units",
                "epsilon_prime_units",
                "delta",
                "c",
                "max_budget_bytes",
                "anchored_estimate",
                "gamma"
            ]
        );
        assert_eq!(
            RawBudget::expected(),
            "\"delay_target\", \"key_binary_search\" or \"key_stochastic\""
        );
    }
}
