//! WAL checkpoints at moments of our choosing. A connection that commits also checkpoints
//! when the WAL has grown past its auto-checkpoint size, inside its commit and with two
//! fsyncs; the send's writer turns that off (its commit must be followed at once by the
//! end-of-data mark) and a [`Checkpointer`] keeps the WAL short from a connection of its own.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::Pool;

/// Runs `PRAGMA wal_checkpoint(PASSIVE)` every `interval` on its own pooled connection until
/// dropped. PASSIVE never waits for readers or writers, so it holds nobody up.
pub struct Checkpointer {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

impl Checkpointer {
    pub fn start(pool: Pool, interval: Duration) -> Self {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let signal = stop.clone();
        let handle = std::thread::Builder::new()
            .name("wal-checkpoint".into())
            .spawn(move || {
                let (lock, wake) = &*signal;
                let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
                while !*stopped {
                    stopped = wake
                        .wait_timeout(stopped, interval)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    if let Ok(conn) = pool.get() {
                        // Busy or a full disk: try again at the next tick.
                        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
                    }
                }
            })
            .ok();
        Checkpointer { stop, handle }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        let (lock, wake) = &*self.stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_all();
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}
