//! Writing metric families from a collector at scrape time, with the label-set bound.
//!
//! A [`Series`] is one label set and its value. [`emit`] writes a family's descriptor and its
//! series; past the cardinality limit the remaining series are summed into one whose label
//! values all read [`FOLDED`], and the number folded away is remembered by the caller's
//! [`Folded`] for `ferromq_metrics_folded_series`.

use std::fmt::Error;

use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

/// The label value of the series that stands for those past the limit.
pub const FOLDED: &str = "_other";

/// One series: its labels (besides the constant ones) and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Label names and values.
    pub labels: Vec<(&'static str, String)>,
    /// The value.
    pub value: f64,
}

impl Series {
    /// A series of `value` with `labels`.
    pub fn new(labels: Vec<(&'static str, String)>, value: impl Into<Number>) -> Self {
        Series { labels, value: value.into().0 }
    }
}

/// Numbers a series may hold (counts are exact up to 2^53).
#[derive(Debug, Clone, Copy)]
pub struct Number(f64);

macro_rules! into_value {
    ($($t:ty),*) => {$(
        impl From<$t> for Number {
            #[allow(clippy::cast_precision_loss, clippy::cast_lossless)]
            fn from(v: $t) -> Self {
                Number(v as f64)
            }
        }
    )*};
}
into_value!(u64, i64, u32, i32, u8, usize, f64);

/// A family's description.
#[derive(Debug, Clone, Copy)]
pub struct Family<'a> {
    /// The name without unit or `_total` (the encoder appends them).
    pub name: &'a str,
    /// The help text.
    pub help: &'a str,
    /// The unit suffix, if any (`milliseconds`, `bytes`).
    pub unit: Option<&'a str>,
    /// Counter or gauge.
    pub kind: Kind,
}

/// What a family is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Monotonic; written with `_total`.
    Counter,
    /// Goes up and down.
    Gauge,
}

/// How many series the families of one scrape folded away, by family name.
#[derive(Debug, Default)]
pub struct Folded(pub Vec<(String, usize)>);

/// Keeps at most `limit` (at least 1) of `series`: past it, the last one kept and those after
/// it are replaced by the one `merge` sums from them, given their label names (`labels`) each
/// with the value [`FOLDED`]; how many were folded away is noted in `folded` under `name`.
fn fold<S>(
    series: &mut Vec<S>,
    limit: usize,
    name: &str,
    folded: &mut Folded,
    labels: fn(&S) -> &[(&'static str, String)],
    merge: impl FnOnce(Vec<(&'static str, String)>, &[S]) -> S,
) {
    let limit = limit.max(1);
    if series.len() > limit {
        let rest = series.split_off(limit - 1);
        folded.0.push((name.to_owned(), rest.len()));
        let folded_labels = labels(&rest[0]).iter().map(|(k, _)| (*k, FOLDED.to_owned())).collect();
        series.push(merge(folded_labels, &rest));
    }
}

/// Writes `family` with `series`, at most `limit` of them (the last standing for the rest).
///
/// # Errors
/// A write error of the encoder.
pub fn emit(
    encoder: &mut DescriptorEncoder<'_>,
    family: Family<'_>,
    mut series: Vec<Series>,
    limit: usize,
    folded: &mut Folded,
) -> Result<(), Error> {
    let merge = |labels, rest: &[Series]| Series { labels, value: rest.iter().map(|s| s.value).sum() };
    fold(&mut series, limit, family.name, folded, |s| &s.labels, merge);
    let unit = family.unit.map(|u| Unit::Other(u.to_owned()));
    let kind = match family.kind {
        Kind::Counter => MetricType::Counter,
        Kind::Gauge => MetricType::Gauge,
    };
    let mut metric = encoder.encode_descriptor(family.name, family.help, unit.as_ref(), kind)?;
    for s in &series {
        let mut one = metric.encode_family(&s.labels)?;
        match family.kind {
            Kind::Counter => one.encode_counter::<NoLabelSet, _, u64>(&s.value, None)?,
            Kind::Gauge => one.encode_gauge(&s.value)?,
        }
    }
    Ok(())
}

/// One histogram series: labels, the observations per bucket (not cumulative; the last
/// entry counts those above every bound) and their sum.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSeries {
    /// Label names and values.
    pub labels: Vec<(&'static str, String)>,
    /// Observations per bucket of the family's bounds, then above the last bound.
    pub counts: Vec<u64>,
    /// Sum of the observations.
    pub sum: f64,
}

/// Writes a histogram family with bucket upper `bounds`, at most `limit` series (the rest
/// summed, bucket by bucket, into one labelled [`FOLDED`]). `family.kind` is not read.
///
/// # Errors
/// A write error of the encoder.
pub fn emit_histogram(
    encoder: &mut DescriptorEncoder<'_>,
    family: Family<'_>,
    bounds: &[f64],
    mut series: Vec<HistogramSeries>,
    limit: usize,
    folded: &mut Folded,
) -> Result<(), Error> {
    let merge = |labels, rest: &[HistogramSeries]| {
        let mut counts = vec![0; bounds.len() + 1];
        for s in rest {
            for (c, v) in counts.iter_mut().zip(&s.counts) {
                *c += v;
            }
        }
        HistogramSeries { labels, counts, sum: rest.iter().map(|s| s.sum).sum() }
    };
    fold(&mut series, limit, family.name, folded, |s| &s.labels, merge);
    let unit = family.unit.map(|u| Unit::Other(u.to_owned()));
    let mut metric = encoder.encode_descriptor(family.name, family.help, unit.as_ref(), MetricType::Histogram)?;
    for s in &series {
        // The encoder makes the counts cumulative.
        let buckets: Vec<(f64, u64)> =
            bounds.iter().copied().chain(std::iter::once(f64::INFINITY)).zip(s.counts.iter().copied()).collect();
        let count = buckets.iter().map(|(_, n)| n).sum();
        let mut one = metric.encode_family(&s.labels)?;
        one.encode_histogram::<NoLabelSet>(s.sum, count, &buckets, None)?;
    }
    Ok(())
}

/// Writes `ferromq_metrics_folded_series`: per family, the series one scrape folded away.
///
/// # Errors
/// A write error of the encoder.
pub fn emit_folded(encoder: &mut DescriptorEncoder<'_>, folded: &Folded) -> Result<(), Error> {
    let series = folded.0.iter().map(|(name, n)| Series::new(vec![("metric", name.clone())], *n)).collect();
    emit(
        encoder,
        Family {
            name: "ferromq_metrics_folded_series",
            help: "Series of a metric past metricsOtelCardinalityLimit, shown summed as one labelled _other",
            unit: None,
            kind: Kind::Gauge,
        },
        series,
        usize::MAX,
        &mut Folded::default(),
    )
}

/// A metric whose whole value is one gauge, written without labels.
///
/// # Errors
/// A write error of the encoder.
pub fn emit_one(
    encoder: &mut DescriptorEncoder<'_>,
    family: Family<'_>,
    value: impl Into<Number>,
) -> Result<(), Error> {
    emit(encoder, family, vec![Series::new(Vec::new(), value)], 1, &mut Folded::default())
}

#[cfg(test)]
mod tests {
    use prometheus_client::collector::Collector;
    use prometheus_client::registry::Registry;

    use super::*;

    /// Four gauge series and three histogram series, each family limited to two.
    #[derive(Debug)]
    struct PastTheLimit;

    impl Collector for PastTheLimit {
        fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), Error> {
            let mut folded = Folded::default();
            let family = |name| Family { name, help: "h", unit: None, kind: Kind::Gauge };
            let series = (1..=4u64).map(|i| Series::new(vec![("topic", format!("t{i}"))], i)).collect();
            emit(&mut encoder, family("queued"), series, 2, &mut folded)?;
            let histograms = (1..=3u64)
                .map(|i| HistogramSeries {
                    labels: vec![("topic", format!("t{i}"))],
                    counts: vec![i, 1],
                    sum: i as f64,
                })
                .collect();
            emit_histogram(&mut encoder, family("sizes"), &[10.0], histograms, 2, &mut folded)?;
            emit_folded(&mut encoder, &folded)
        }
    }

    #[test]
    fn series_past_the_limit_are_summed_into_one_labelled_other() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(PastTheLimit));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        // The first series stays; the rest are summed (bucket by bucket for the histogram).
        for line in [
            "queued{topic=\"t1\"} 1.0",
            "queued{topic=\"_other\"} 9.0",
            "sizes_bucket{le=\"10.0\",topic=\"t1\"} 1",
            "sizes_sum{topic=\"_other\"} 5.0",
            "sizes_bucket{le=\"10.0\",topic=\"_other\"} 5",
            "sizes_bucket{le=\"+Inf\",topic=\"_other\"} 7",
            "ferromq_metrics_folded_series{metric=\"queued\"} 3.0",
            "ferromq_metrics_folded_series{metric=\"sizes\"} 2.0",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line} in:\n{text}");
        }
        assert!(!text.contains("t2"), "{text}");
    }
}
