//! Hot-path counters by key (a topic, or a topic and group), bounded in keys.
//!
//! A counter is found under a read lock and bumped with relaxed atomics: no allocation and no
//! write lock once a key exists. A table holds at most `max_keys` keys; what a new key past it
//! would count goes to one overflow row (shown as `_other`), and the keys turned away are
//! counted, so a client inventing topic names cannot grow the process without bound.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// `N` counters per key.
#[derive(Debug)]
pub struct CounterTable<const N: usize> {
    rows: RwLock<HashMap<Box<str>, Arc<[AtomicU64; N]>>>,
    overflow: [AtomicU64; N],
    turned_away: AtomicU64,
    max_keys: usize,
}

/// One row of a [`CounterTable::snapshot`].
pub type Row<const N: usize> = (String, [u64; N]);

impl<const N: usize> CounterTable<N> {
    /// A table of at most `max_keys` keys.
    pub fn new(max_keys: usize) -> Self {
        CounterTable {
            rows: RwLock::new(HashMap::new()),
            overflow: std::array::from_fn(|_| AtomicU64::new(0)),
            turned_away: AtomicU64::new(0),
            max_keys,
        }
    }

    /// Adds each `(column, n)` to the row of `key`.
    pub fn add(&self, key: &str, adds: &[(usize, u64)]) {
        let bump = |row: &[AtomicU64; N]| {
            for &(column, n) in adds {
                if let Some(cell) = row.get(column) {
                    cell.fetch_add(n, Ordering::Relaxed);
                }
            }
        };
        if let Some(row) = self.rows.read().unwrap_or_else(|e| e.into_inner()).get(key) {
            bump(row);
            return;
        }
        let mut rows = self.rows.write().unwrap_or_else(|e| e.into_inner());
        if let Some(row) = rows.get(key) {
            bump(row);
        } else if rows.len() < self.max_keys {
            let row = Arc::new(std::array::from_fn(|_| AtomicU64::new(0)));
            bump(&row);
            rows.insert(key.into(), row);
        } else {
            drop(rows);
            self.turned_away.fetch_add(1, Ordering::Relaxed);
            bump(&self.overflow);
        }
    }

    /// Every row, sorted by key, then the overflow row (if anything overflowed) as `None`.
    pub fn snapshot(&self) -> (Vec<Row<N>>, Option<[u64; N]>) {
        let read = |row: &[AtomicU64; N]| -> [u64; N] { std::array::from_fn(|i| row[i].load(Ordering::Relaxed)) };
        let mut rows: Vec<Row<N>> =
            self.rows.read().unwrap_or_else(|e| e.into_inner()).iter().map(|(k, v)| (k.to_string(), read(v))).collect();
        rows.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let overflow = read(&self.overflow);
        (rows, overflow.iter().any(|v| *v > 0).then_some(overflow))
    }

    /// How many times a new key was turned away because the table was full.
    pub fn turned_away(&self) -> u64 {
        self.turned_away.load(Ordering::Relaxed)
    }

    /// Drops the rows whose key satisfies `doomed` (a deleted topic or group).
    pub fn remove_where(&self, doomed: impl Fn(&str) -> bool) {
        self.rows.write().unwrap_or_else(|e| e.into_inner()).retain(|k, _| !doomed(k));
    }

    /// How many keys the table holds.
    pub fn len(&self) -> usize {
        self.rows.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Whether the table holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_count_per_key_and_overflow_past_the_bound() {
        let t = CounterTable::<2>::new(2);
        t.add("b", &[(0, 1), (1, 10)]);
        t.add("a", &[(0, 2)]);
        t.add("b", &[(0, 1), (1, 5)]);
        t.add("c", &[(0, 7), (1, 70)]);
        t.add("d", &[(0, 1)]);
        t.add("a", &[(9, 1)]); // no such column: ignored
        let (rows, overflow) = t.snapshot();
        assert_eq!(rows, vec![("a".to_owned(), [2, 0]), ("b".to_owned(), [2, 15])]);
        assert_eq!(overflow, Some([8, 70]));
        assert_eq!(t.turned_away(), 2);
        t.remove_where(|k| k == "a");
        assert_eq!(t.len(), 1);
        t.add("e", &[(0, 1)]);
        assert_eq!(t.snapshot().0.last().map(|r| r.0.as_str()), Some("e"));
    }
}
