//! The SSRF guard: webhook URLs must not reach the server's own network. A URL is refused when
//! any address its host resolves to is loopback, private, link-local, unique-local, shared
//! (CGNAT), unspecified, multicast or otherwise not globally routable; checked when a
//! subscription is saved and again before every attempt (DNS can change).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, ToSocketAddrs};

fn v4_is_internal(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b))
        || (a == 198 && (b == 18 || b == 19))
        || a >= 240
}

fn v6_is_internal(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip
        .to_ipv4_mapped()
        .or_else(|| ip.to_ipv4().filter(|_| ip.segments()[..6] == [0; 6]))
    {
        return v4_is_internal(v4);
    }
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_unique_local()
        || ip.is_unicast_link_local()
        || ip.segments()[0] == 0x2001 && ip.segments()[1] == 0x0db8
}

/// Whether an address belongs to a private or special-purpose network.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_is_internal(v4),
        IpAddr::V6(v6) => v6_is_internal(v6),
    }
}

/// `Ok` when `url` may receive webhooks; `Err` says why not, in words for the owner.
pub fn check_url(url: &str, allow_private: bool) -> Result<(), String> {
    let parsed =
        url::Url::parse(url).map_err(|_| "must be an absolute http or https URL".to_string())?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("must be an absolute http or https URL".into());
    }
    if allow_private {
        return Ok(());
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| "must name a host".to_string())?
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = parsed.port_or_known_default().unwrap_or(80);
    let addresses: Vec<IpAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|_| format!("host {host} does not resolve"))?
        .map(|a| a.ip())
        .collect();
    if addresses.is_empty() {
        return Err(format!("host {host} does not resolve"));
    }
    if let Some(ip) = addresses.iter().find(|ip| is_internal(**ip)) {
        return Err(format!(
            "resolves to {ip}, a private or local address; webhooks may only go to public addresses"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_internal_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fc00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
        assert!(check_url("http://127.0.0.1:9/x", false).is_err());
        assert!(check_url("http://localhost/x", false).is_err());
        assert!(check_url("http://[::1]/x", false).is_err());
        assert!(check_url("http://127.0.0.1:9/x", true).is_ok());
        assert!(check_url("ftp://example.com/", true).is_err());
    }
}
