//! Filter evaluation throughput: three representative SQL92 expressions against a message with
//! ten properties, plus the bloom-filter position calculation done per subscription. Run with
//! `cargo bench -p ferromq-filter --bench filter`; figures go to docs/benchmarks.md.

use std::collections::HashMap;
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferromq_filter::{parse, BloomFilter};

/// Properties a typical message carries: a few system ones and some user ones.
fn message_properties() -> HashMap<String, String> {
    [
        ("TAGS", "TagA"),
        ("KEYS", "order-20240101-0001"),
        ("UNIQ_KEY", "7F0000011A2B18B4AAC25C3F1F0A0000"),
        ("WAIT", "true"),
        ("region", "eu-west"),
        ("a", "7"),
        ("b", "x"),
        ("price", "129.5"),
        ("level", "3"),
        ("channel", "web"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn evaluation(c: &mut Criterion) {
    let props = message_properties();
    let expressions = [
        ("and_of_two_comparisons", "a > 5 AND b = 'x'"),
        (
            "in_list_of_10",
            "region IN ('us-east', 'us-west', 'ap-south', 'ap-east', 'sa-east', 'me-central', 'af-south', 'eu-north', 'eu-central', 'eu-west')",
        ),
        // `100.0`, not `100`: Java reads the property with the literal's type, and "129.5" is not
        // an int.
        ("between_or_startswith", "price BETWEEN 100.0 AND 200.5 OR (level > 4 AND channel STARTSWITH 'app')"),
    ];
    let mut group = c.benchmark_group("evaluate");
    group.throughput(Throughput::Elements(1));
    for (name, text) in expressions {
        let expression = parse(text).expect("benchmark expressions are valid");
        assert!(expression.matches(&props), "{name} should match the sample message");
        group.bench_function(name, |b| b.iter(|| black_box(&expression).matches(black_box(&props))));
    }
    group.finish();

    c.bench_function("parse/between_or_startswith", |b| b.iter(|| parse(black_box(expressions[2].1))));
}

fn bloom(c: &mut Criterion) {
    let filter = BloomFilter::new(20, 32).expect("broker defaults are valid");
    c.bench_function("bloom/subscription_positions", |b| {
        b.iter(|| filter.subscription_positions(black_box("CID_order_consumer"), black_box("OrderTopic")))
    });
}

criterion_group!(benches, evaluation, bloom);
criterion_main!(benches);
