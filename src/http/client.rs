//! The client's network address, which the per-client limits count against (sign-in,
//! sign-up, the public subscribe form). Behind a reverse proxy every request comes from the
//! proxy, so `X-Forwarded-For` is believed, but only from the `--trusted-proxy` addresses:
//! from anyone else the header is ignored, or a client could name a new address per request.

use std::net::{IpAddr, SocketAddr};

use poem::Request;

use crate::state::AppState;

/// The key of the client's buckets: its IPv4 address, or the /64 network of an IPv6 address
/// (one host usually holds a whole /64, so single IPv6 addresses cost an attacker nothing).
pub fn client_address(req: &Request, state: &AppState) -> String {
    client_ip_of(req, state).map_or_else(|| "unknown".to_string(), bucket_key)
}

/// The address the request came from (through `--trusted-proxy`), when known.
pub fn client_ip_of(req: &Request, state: &AppState) -> Option<IpAddr> {
    let peer = req.remote_addr().as_socket_addr().map(SocketAddr::ip)?;
    let forwarded: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    Some(client_ip(peer, &forwarded, &state.trusted_proxies))
}

/// The peer itself, unless it is a trusted proxy: then the right-most address of
/// `X-Forwarded-For` (all its headers in order, each a comma-separated list) that is not a
/// trusted proxy itself. Entries left of that one were written by the client and prove
/// nothing. A list with no such entry, or an unreadable one there, leaves the peer.
fn client_ip(peer: IpAddr, forwarded_for: &[&str], trusted: &[IpAddr]) -> IpAddr {
    let peer = peer.to_canonical();
    if !trusted.contains(&peer) {
        return peer;
    }
    let entries = forwarded_for
        .iter()
        .flat_map(|header| header.split(','))
        .map(str::trim)
        .rev();
    for entry in entries {
        match parse_entry(entry) {
            Some(ip) if trusted.contains(&ip) => continue,
            Some(ip) => return ip,
            None => return peer,
        }
    }
    peer
}

/// `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1` or `[2001:db8::1]:443`.
fn parse_entry(entry: &str) -> Option<IpAddr> {
    entry
        .parse::<IpAddr>()
        .or_else(|_| entry.parse::<SocketAddr>().map(|s| s.ip()))
        .ok()
        .map(|ip| ip.to_canonical())
}

fn bucket_key(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
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
    fn without_trusted_proxies_the_header_is_ignored() {
        assert_eq!(
            client_ip(ip("203.0.113.9"), &["198.51.100.1"], &[]),
            ip("203.0.113.9")
        );
        // A proxy that is not named is just a client.
        assert_eq!(
            client_ip(ip("127.0.0.1"), &["198.51.100.1"], &[ip("10.0.0.1")]),
            ip("127.0.0.1")
        );
    }

    #[test]
    fn behind_trusted_proxies_the_right_most_untrusted_entry_is_the_client() {
        let trusted = [ip("127.0.0.1"), ip("10.0.0.2")];
        let peer = ip("127.0.0.1");
        assert_eq!(
            client_ip(peer, &["198.51.100.1"], &trusted),
            ip("198.51.100.1")
        );
        // Whatever the client wrote itself is left of what the proxy appended.
        assert_eq!(
            client_ip(
                peer,
                &["6.6.6.6, 1.1.1.1", "198.51.100.1, 10.0.0.2"],
                &trusted
            ),
            ip("198.51.100.1")
        );
        assert_eq!(
            client_ip(peer, &["[2001:db8::7]:443", "198.51.100.1:5000"], &trusted),
            ip("198.51.100.1")
        );
        // Nothing usable: the proxy's own address.
        assert_eq!(client_ip(peer, &[], &trusted), peer);
        assert_eq!(client_ip(peer, &["10.0.0.2"], &trusted), peer);
        assert_eq!(client_ip(peer, &["1.1.1.1, junk"], &trusted), peer);
        // An IPv4 peer seen on a dual-stack socket is still the trusted address.
        assert_eq!(
            client_ip(ip("::ffff:127.0.0.1"), &["198.51.100.1"], &trusted),
            ip("198.51.100.1")
        );
    }

    #[test]
    fn ipv6_clients_share_the_bucket_of_their_64() {
        assert_eq!(bucket_key(ip("192.0.2.1")), "192.0.2.1");
        assert_eq!(
            bucket_key(ip("2001:db8:1:2:aaaa::1")),
            bucket_key(ip("2001:db8:1:2:bbbb::9"))
        );
        assert_ne!(
            bucket_key(ip("2001:db8:1:2::1")),
            bucket_key(ip("2001:db8:1:3::1"))
        );
    }
}
