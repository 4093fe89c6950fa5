//! What the two listeners share (the HTTP server, `http::server`, and the SMTP bounce
//! listener, `mail::bounce_listener`): who a client is, and how many connections each client,
//! and all of them together, may hold at once. One client cannot take every place.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};

/// The network a connection counts against: an IPv4 address as it is, the /64 of an IPv6
/// address (one host usually holds a whole /64, so single IPv6 addresses would cost an
/// attacker nothing). An IPv4-mapped IPv6 address counts as its IPv4 address.
pub fn network(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !u128::from(u64::MAX))),
        v4 => v4,
    }
}

/// How many connections are held at once.
#[derive(Debug, Clone)]
pub struct ConnectionCaps {
    /// Per client ([`network`]).
    pub per_client: usize,
    /// In all.
    pub total: usize,
    /// Peers not held to `per_client` (a trusted reverse proxy, which carries many clients);
    /// they still count in `total`.
    pub exempt: Vec<IpAddr>,
}

/// Which cap a connection would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Over {
    Client,
    Total,
}

/// The connections open, per client and in all, under [`ConnectionCaps`].
pub struct Places {
    caps: ConnectionCaps,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    total: usize,
    by_client: HashMap<IpAddr, usize>,
}

/// One open connection's place; dropping it frees the place.
pub struct Place {
    places: Arc<Places>,
    /// The client it counts against, unless exempt.
    client: Option<IpAddr>,
}

impl Places {
    pub fn new(caps: ConnectionCaps) -> Arc<Self> {
        let exempt = caps.exempt.iter().map(|ip| ip.to_canonical()).collect();
        Arc::new(Places {
            caps: ConnectionCaps { exempt, ..caps },
            open: Mutex::new(Open::default()),
        })
    }

    pub fn caps(&self) -> &ConnectionCaps {
        &self.caps
    }

    /// A place for a connection from `peer`, unless it would pass a cap.
    pub fn take(self: &Arc<Self>, peer: IpAddr) -> Result<Place, Over> {
        let client = (!self.caps.exempt.contains(&peer.to_canonical())).then(|| network(peer));
        let mut open = self
            .open
            .lock()
            .expect("the places' lock is never poisoned");
        if open.total >= self.caps.total {
            return Err(Over::Total);
        }
        if let Some(client) = client {
            let count = open.by_client.entry(client).or_default();
            if *count >= self.caps.per_client {
                return Err(Over::Client);
            }
            *count += 1;
        }
        open.total += 1;
        Ok(Place {
            places: self.clone(),
            client,
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut open = self
            .places
            .open
            .lock()
            .expect("the places' lock is never poisoned");
        open.total -= 1;
        if let Some(client) = self.client
            && let Some(count) = open.by_client.get_mut(&client)
        {
            *count -= 1;
            if *count == 0 {
                open.by_client.remove(&client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_ipv6_client_is_its_64_and_a_mapped_ipv4_its_address() {
        assert_eq!(network(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(network(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
        assert_eq!(network(ip("192.0.2.1")), ip("192.0.2.1"));
    }

    #[test]
    fn places_are_capped_per_client_and_in_all_and_freed_when_dropped() {
        let places = Places::new(ConnectionCaps {
            per_client: 2,
            total: 3,
            exempt: vec![ip("10.0.0.1")],
        });
        let first = places.take(ip("2001:db8::1")).unwrap();
        let _second = places.take(ip("2001:db8::2")).unwrap();
        // The same /64: over its cap.
        assert_eq!(places.take(ip("2001:db8::3")).err(), Some(Over::Client));
        let _proxy = places.take(ip("10.0.0.1")).unwrap();
        // Three in all: even the exempt proxy waits.
        assert_eq!(places.take(ip("10.0.0.1")).err(), Some(Over::Total));
        drop(first);
        assert!(places.take(ip("2001:db8::3")).is_ok());
    }
}
