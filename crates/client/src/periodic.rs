//! The consumers' housekeeping loops: a step run every interval, and at once when asked.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Notify;

/// Runs `step` every `interval` (the first time one interval from now) and also whenever
/// `wake` is notified; the interval keeps its phase. Runs until its task is dropped.
pub(crate) async fn run_every<F, Fut>(interval: Duration, wake: Option<&Notify>, mut step: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    loop {
        match wake {
            Some(wake) => tokio::select! {
                _ = tick.tick() => {}
                () = wake.notified() => {}
            },
            None => {
                tick.tick().await;
            }
        }
        step().await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn steps_every_interval_and_at_once_when_woken() {
        let runs = Arc::new(AtomicUsize::new(0));
        let wake = Arc::new(Notify::new());
        let task = {
            let (runs, wake) = (runs.clone(), wake.clone());
            tokio::spawn(async move {
                run_every(Duration::from_secs(10), Some(&wake), || async {
                    runs.fetch_add(1, Ordering::SeqCst);
                })
                .await;
            })
        };
        tokio::time::sleep(Duration::from_secs(9)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing before the first interval");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        wake.notify_one();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 2, "a wake runs the step at once");
        tokio::time::sleep(Duration::from_secs(9)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 3, "the interval kept its phase");
        task.abort();
    }
}
