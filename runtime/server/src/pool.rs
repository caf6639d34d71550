//! A small pool of store connections: a `Store` is one SQLite connection (not `Sync`), so each
//! blocking task borrows one and gives it back. Connections are opened on demand and at most
//! [`MAX_IDLE`] are kept between requests.

use std::path::PathBuf;
use std::sync::Mutex;

use easeml_store::Store;

/// The most idle connections kept.
const MAX_IDLE: usize = 16;

/// Store connections to one home directory.
pub(crate) struct StorePool {
    home: PathBuf,
    idle: Mutex<Vec<Store>>,
}

impl StorePool {
    /// Opens the store once (creating and migrating it, so a bad home fails at start-up) and keeps
    /// that connection.
    pub(crate) fn open(home: PathBuf) -> crate::Result<StorePool> {
        let store = Store::open(&home)?;
        Ok(StorePool {
            home,
            idle: Mutex::new(vec![store]),
        })
    }

    /// An idle connection, or a new one.
    pub(crate) fn get(&self) -> crate::Result<Store> {
        let idle = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        match idle {
            Some(store) => Ok(store),
            None => Ok(Store::open(&self.home)?),
        }
    }

    /// Gives a connection back (dropped when enough are idle).
    pub(crate) fn put(&self, store: Store) {
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < MAX_IDLE
        {
            idle.push(store);
        }
    }
}
