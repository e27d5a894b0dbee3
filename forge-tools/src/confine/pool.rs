//! A few threads kept for the init's answers to the command's calls:
//! starting a thread per call would cost more than most calls do.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    idle: usize,
    threads: usize,
}

pub(super) struct Pool {
    shared: Arc<(Mutex<Queue>, Condvar)>,
    max: usize,
}

/// How long an idle thread waits for work before it ends.
const IDLE: Duration = Duration::from_secs(10);

impl Pool {
    pub(super) fn new(max: usize) -> Pool {
        Pool { shared: Arc::new((Mutex::new(Queue::default()), Condvar::new())), max: max.max(1) }
    }

    /// Runs `job` on an idle thread, a new one below the bound, or the
    /// first to be free.
    pub(super) fn run(&self, job: impl FnOnce() + Send + 'static) {
        let (lock, ready) = &*self.shared;
        let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
        q.jobs.push_back(Box::new(job));
        // Each waiting job needs a thread of its own: a blocked one may be
        // waiting for what the next one does.
        if q.jobs.len() <= q.idle {
            ready.notify_one();
            return;
        }
        if q.threads < self.max {
            q.threads += 1;
            let shared = self.shared.clone();
            if std::thread::Builder::new().name("forge-notif".into()).spawn(move || work(&shared)).is_err() {
                q.threads -= 1;
                // No thread to be had: answer here, in turn.
                if let Some(job) = q.jobs.pop_back() {
                    drop(q);
                    job();
                }
            }
        }
    }
}

fn work(shared: &(Mutex<Queue>, Condvar)) {
    let (lock, ready) = shared;
    let mut q = lock.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        if let Some(job) = q.jobs.pop_front() {
            drop(q);
            job();
            q = lock.lock().unwrap_or_else(|p| p.into_inner());
            continue;
        }
        q.idle += 1;
        let (next, timeout) = ready.wait_timeout(q, IDLE).unwrap_or_else(|p| p.into_inner());
        q = next;
        q.idle -= 1;
        if timeout.timed_out() && q.jobs.is_empty() {
            q.threads -= 1;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_job_runs_even_past_the_bound_of_threads() {
        let pool = Pool::new(2);
        let (tx, rx) = std::sync::mpsc::channel();
        for i in 0..50 {
            let tx = tx.clone();
            pool.run(move || {
                let _ = tx.send(i);
            });
        }
        let mut got: Vec<i32> = (0..50).map(|_| rx.recv_timeout(Duration::from_secs(10)).unwrap_or(-1)).collect();
        got.sort();
        assert_eq!(got, (0..50).collect::<Vec<_>>());
    }
}
