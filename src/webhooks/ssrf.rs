//! The SSRF guard: webhooks must not reach the server's own network, nor anything else that is
//! not the public Internet. A receiver's host is resolved once, through the resolver that also
//! verifies custom domains (`--dns-server` or the system's), every address it resolves to is
//! checked, and the attempt connects to those checked addresses and no others (`deliver`
//! hands them to the HTTP client in place of its resolver), so DNS cannot answer one thing to
//! the check and another to the connection (DNS rebinding). Checked when a subscription is
//! saved and again before every attempt, since DNS can change.
//!
//! A URL is refused when *any* address of its host is special-purpose, not only when all are:
//! a client may try them in any order, so one private address is enough to reach inside.
//! Special-purpose means: listed in IANA's IPv4 or IPv6 Special-Purpose Address Registry
//! (loopback, private, shared 100.64/10, link-local, unique-local, documentation,
//! benchmarking, IETF protocol assignments, reserved, IPv4-mapped, IPv4/IPv6 translation,
//! 6to4, Teredo, discard-only, ...; the tables are the `iprfc` crate's, generated from IANA's
//! registries), multicast, or an IPv6 address that carries an IPv4 address (`::a.b.c.d`)
//! that would itself be refused. The one registry block judged by what it carries is the
//! well-known NAT64 prefix 64:ff9b::/96: on an IPv6-only host DNS64 gives every IPv4-only
//! receiver such an address, so it passes exactly when the IPv4 address in its last 32 bits
//! would (64:ff9b::7f00:1 is 127.0.0.1 and is refused).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::domain::newsletters::custom_domains::Dns;

fn v4_is_special(ip: Ipv4Addr) -> bool {
    iprfc::RFC6890.contains(&ip) || ip.is_multicast()
}

fn v6_is_special(ip: Ipv6Addr) -> bool {
    if iprfc::RFC6052.contains(&ip) {
        let [.., a, b, c, d] = ip.octets();
        return v4_is_special(Ipv4Addr::new(a, b, c, d));
    }
    iprfc::RFC6890.contains(&ip) || ip.is_multicast() || ip.to_ipv4().is_some_and(v4_is_special)
}

/// Whether webhooks must not go to `ip` (see the module's documentation).
pub fn is_special_purpose(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_is_special(v4),
        IpAddr::V6(v6) => v6_is_special(v6),
    }
}

fn parse(url: &str) -> Result<url::Url, String> {
    url::Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| "must be an absolute http or https URL".to_string())
}

/// The addresses to deliver to `url` at: its host resolved once and, unless `allow_private`,
/// every address checked. Connect to these and no others. `Err` says why not, in words for
/// the owner.
pub async fn resolve(url: &str, allow_private: bool, dns: &Dns) -> Result<Vec<SocketAddr>, String> {
    let parsed = parse(url)?;
    let port = parsed.port_or_known_default().unwrap_or(80);
    let addresses = match parsed.host() {
        Some(url::Host::Ipv4(ip)) => vec![IpAddr::V4(ip)],
        Some(url::Host::Ipv6(ip)) => vec![IpAddr::V6(ip)],
        Some(url::Host::Domain(name)) => dns.connect_addresses(name).await?,
        None => return Err("must name a host".into()),
    };
    if !allow_private && let Some(ip) = addresses.iter().find(|ip| is_special_purpose(**ip)) {
        return Err(format!(
            "resolves to {ip}, a private or special-purpose address; webhooks may only go to public addresses"
        ));
    }
    Ok(addresses
        .into_iter()
        .map(|ip| SocketAddr::new(ip, port))
        .collect())
}

/// The address to connect to a mail relay of a newsletter's owner at: `host` (a name or an
/// IP address, as `domain::delivery::relays` keeps it) resolved once through the server's resolver and,
/// unless `allow_private` (`--allow-private-relays`), refused when any address it resolves to
/// is special-purpose, by the same rule as webhooks. The first address found; connect there
/// and nowhere else (`SmtpSettings::pinned`). `Err` says why not, in words for the owner.
pub async fn resolve_host(
    host: &str,
    port: u16,
    allow_private: bool,
    dns: &Dns,
) -> Result<SocketAddr, String> {
    let literal = host.parse::<IpAddr>().ok();
    let addresses = match literal {
        Some(ip) => vec![ip],
        None => dns.connect_addresses(host).await?,
    };
    if !allow_private && let Some(ip) = addresses.iter().find(|ip| is_special_purpose(**ip)) {
        let what = match literal {
            Some(_) => format!("{ip} is"),
            None => format!("{host} resolves to {ip},"),
        };
        return Err(format!(
            "{what} a private or special-purpose address; a newsletter's relay must be on the \
             public Internet (the server's operator can allow private ones with \
             --allow-private-relays)"
        ));
    }
    addresses
        .first()
        .map(|ip| SocketAddr::new(*ip, port))
        .ok_or_else(|| format!("host {host} does not resolve"))
}

/// `Ok` when `url` may receive webhooks; `Err` says why not, in words for the owner. With
/// `allow_private` the host is not looked up: any http(s) URL will do. Blocks on the lookup,
/// so call it off the async threads (the API runs it inside a database task).
pub fn check_url(url: &str, allow_private: bool, dns: &Dns) -> Result<(), String> {
    parse(url)?;
    if allow_private {
        return Ok(());
    }
    let lookup = resolve(url, false, dns);
    match tokio::runtime::Handle::try_current() {
        // A blocking thread of the server's runtime, whose workers drive the lookup.
        Ok(handle) => handle.block_on(lookup),
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot look the host up: {e}"))?
            .block_on(lookup),
    }
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_special_purpose_addresses() {
        for ip in [
            // IPv4: loopback, private, link-local (cloud metadata), this network, shared
            // (CGNAT), IETF protocol assignments, benchmarking, documentation, reserved,
            // broadcast, multicast.
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "0.1.2.3",
            "100.64.0.1",
            "100.127.255.254",
            "192.0.0.1",
            "192.0.0.9",
            "198.18.0.1",
            "198.19.255.1",
            "192.0.2.1",
            "198.51.100.7",
            "203.0.113.9",
            "240.0.0.1",
            "255.255.255.255",
            "224.0.0.1",
            "239.1.2.3",
            // IPv6: loopback, unspecified, unique-local, link-local, documentation, multicast.
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "2001:db8::1",
            "3fff::1",
            "ff02::1",
            "ff0e::1",
            // IPv4 inside IPv6: mapped, compatible, NAT64 (well-known and local-use), 6to4,
            // Teredo, and the rest of the IETF block; discard-only; SRv6.
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:8.8.8.8",
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b::a00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::808:808",
            "2002:7f00:1::",
            "2002:808:808::1",
            "2001::1",
            "2001:2::1",
            "2001:10::1",
            "100::1",
            "5f00::1",
        ] {
            assert!(
                is_special_purpose(ip.parse().unwrap()),
                "{ip} should be refused"
            );
        }
    }

    #[test]
    fn lets_public_addresses_through() {
        for ip in [
            "93.184.216.34",
            "1.1.1.1",
            "8.8.8.8",
            "100.128.0.1",
            "172.32.0.1",
            "2606:4700:4700::1111",
            "2a00:1450:4001:82a::200e",
            // NAT64 of a public IPv4 address: what DNS64 answers on an IPv6-only host.
            "64:ff9b::808:808",
        ] {
            assert!(!is_special_purpose(ip.parse().unwrap()), "{ip} should pass");
        }
    }

    #[test]
    fn checks_urls_without_a_lookup_for_literals() {
        let dns = Dns::default();
        for url in [
            "http://127.0.0.1:9/x",
            "http://[::1]/x",
            "http://localhost/x",
            "http://[64:ff9b::7f00:1]/x",
            "http://[2002:7f00:1::]/x",
            "http://[::ffff:127.0.0.1]/x",
            "http://2130706433/x",
            "http://0x7f.1/x",
            "http://100.64.0.1/x",
        ] {
            let error = check_url(url, false, &dns).unwrap_err();
            assert!(error.contains("special-purpose"), "{url}: {error}");
        }
        assert!(check_url("http://127.0.0.1:9/x", true, &dns).is_ok());
        assert!(check_url("ftp://example.com/", true, &dns).is_err());
        assert!(check_url("not a url", true, &dns).is_err());
        let pinned = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(resolve("https://93.184.216.34/hook", false, &dns))
            .unwrap();
        assert_eq!(pinned, vec!["93.184.216.34:443".parse().unwrap()]);
    }

    #[test]
    fn relays_resolve_to_one_checked_address() {
        let dns = Dns::default();
        let run = |host: &'static str, allow: bool| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(resolve_host(host, 587, allow, &dns))
        };
        for private in [
            "127.0.0.1",
            "10.0.0.25",
            "::1",
            "::ffff:127.0.0.1",
            "localhost",
        ] {
            let error = run(private, false).unwrap_err();
            assert!(
                error.contains("special-purpose") && error.contains("--allow-private-relays"),
                "{private}: {error}"
            );
        }
        assert_eq!(
            run("127.0.0.1", true).unwrap(),
            "127.0.0.1:587".parse().unwrap()
        );
        assert_eq!(
            run("93.184.216.34", false).unwrap(),
            "93.184.216.34:587".parse().unwrap()
        );
    }
}
