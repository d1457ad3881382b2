//! Work spread over a few threads while the store opens: consume queues opened and recovered,
//! CommitLog segments re-checked. Otherwise a restart is one thread walking thousands of files
//! or gigabytes of records.

/// The threads a [`map`] uses at most: one per CPU, no more than four.
fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get).min(4)
}

/// `f` over each of `items`, the results in item order. Unless `spread`, or with one thread or
/// item, on the calling thread; otherwise on scoped threads that take the items in turn (item
/// `i` on thread `i % threads`, so neighbours of equal weight, such as full segments, run side
/// by side). A panic in `f` is resumed on the caller.
pub(crate) fn map<T: Sync, R: Send>(items: &[T], spread: bool, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = threads().min(items.len());
    if !spread || threads < 2 {
        return items.iter().map(f).collect();
    }
    let f = &f;
    std::thread::scope(|s| {
        let parts: Vec<_> = (0..threads)
            .map(|t| s.spawn(move || items.iter().skip(t).step_by(threads).map(f).collect::<Vec<R>>()))
            .collect();
        let mut parts: Vec<_> = parts
            .into_iter()
            .map(|p| p.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)).into_iter())
            .collect();
        (0..items.len()).map(|i| parts[i % threads].next().expect("one result per item")).collect()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_come_back_in_item_order_spread_or_not() {
        let items: Vec<u32> = (0..1_001).collect();
        let squares: Vec<u64> = items.iter().map(|&i| u64::from(i) * u64::from(i)).collect();
        assert_eq!(super::map(&items, true, |&i| u64::from(i) * u64::from(i)), squares);
        assert_eq!(super::map(&items, false, |&i| u64::from(i) * u64::from(i)), squares);
        assert!(super::map(&[] as &[u32], true, |&i| i).is_empty());
    }
}
