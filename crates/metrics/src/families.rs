//! Helpers that write one metric family (one series, or one per label set) to an encoder.

use std::fmt;

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, EncodeMetric, MetricEncoder,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

pub(crate) fn counter<N: EncodeCounterValue>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: N,
) -> Result<(), fmt::Error> {
    ConstCounter::new(value).encode(enc.encode_descriptor(name, help, unit, MetricType::Counter)?)
}

pub(crate) fn gauge<N: EncodeGaugeValue>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: N,
) -> Result<(), fmt::Error> {
    ConstGauge::new(value).encode(enc.encode_descriptor(name, help, unit, MetricType::Gauge)?)
}

pub(crate) fn counter_family<L: EncodeLabelSet, N: EncodeCounterValue>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    samples: impl IntoIterator<Item = (L, N)>,
) -> Result<(), fmt::Error> {
    family(enc, name, help, unit, MetricType::Counter, samples, |m, v| {
        ConstCounter::new(v).encode(m)
    })
}

pub(crate) fn gauge_family<L: EncodeLabelSet, N: EncodeGaugeValue>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    samples: impl IntoIterator<Item = (L, N)>,
) -> Result<(), fmt::Error> {
    family(enc, name, help, unit, MetricType::Gauge, samples, |m, v| {
        ConstGauge::new(v).encode(m)
    })
}

/// One metric family: the descriptor, then one sample per label set. A family without samples is
/// left out, descriptor included.
pub(crate) fn family<L: EncodeLabelSet, N>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    metric_type: MetricType,
    samples: impl IntoIterator<Item = (L, N)>,
    encode: impl Fn(MetricEncoder, N) -> Result<(), fmt::Error>,
) -> Result<(), fmt::Error> {
    let mut samples = samples.into_iter().peekable();
    if samples.peek().is_none() {
        return Ok(());
    }
    let mut metric = enc.encode_descriptor(name, help, unit, metric_type)?;
    for (labels, value) in samples {
        encode(metric.encode_family(&labels)?, value)?;
    }
    Ok(())
}
