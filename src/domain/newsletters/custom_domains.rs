//! Custom domains: a newsletter's own domain (`www.example.com` or `example.com`), served
//! like its subdomain once the owner's DNS records prove both that the domain points at us
//! and that the owner controls it (a TXT record with a random token).
//!
//! One custom domain per newsletter; a domain belongs to one newsletter across the service.
//! A claim that stays unverified for [`STALE_CLAIM_DAYS`] gives way to another newsletter
//! that submits the same domain, so nobody can hold a domain they do not control.

use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_resolver::config::{LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig};
use hickory_resolver::net::NetError;
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::{RData, RecordType};
use hickory_resolver::{Resolver, TokioResolver};
use rusqlite::{Connection, OptionalExtension, Row};

use crate::clock::Timestamp;
use crate::domain::newsletters::{self, Newsletter};
use crate::domain::values::secrets::random_hex;
use crate::domain::values::urls::{SiteUrls, split_port, subdomain_of};
use crate::domain::{DomainError, DomainResult, FieldErrors};
use crate::store::{Db, write_tx};

/// The label in front of the domain that holds the verification token.
pub const VERIFY_LABEL: &str = "_broadsheet-verify";
/// Days an unverified claim keeps a domain from other newsletters.
pub const STALE_CLAIM_DAYS: i64 = 7;
/// The longest domain accepted: `_broadsheet-verify.<domain>` must stay within DNS's 253.
pub const DOMAIN_MAX: usize = 253 - VERIFY_LABEL.len() - 1;
/// Top-level names that never lead to a public website (RFC 6761, RFC 7686, mDNS).
const SPECIAL_USE: &[&str] = &["localhost", "local", "invalid", "onion", "arpa"];
/// The form field the messages belong to.
const FIELD: &str = "domain";

crate::string_enum!(
    /// How the domain points at the service.
    pub Method {
        /// A CNAME to `<subdomain>.<public-host>` (www.example.com, news.example.com).
        Subdomain => "subdomain",
        /// A/AAAA records with the addresses of `<subdomain>.<public-host>` (example.com,
        /// where DNS allows no CNAME).
        Apex => "apex",
    }
);

impl Method {
    /// What the choose-method page says about each choice.
    pub fn describe(self) -> &'static str {
        match self {
            Method::Subdomain => {
                "A subdomain such as www.example.com or news.example.com (a CNAME record)"
            }
            Method::Apex => "An apex domain such as example.com (A and AAAA records)",
        }
    }

    /// The method a domain most likely needs: two labels are an apex domain. Used when the
    /// form does not say (e.g. `example.co.uk` should be submitted with `apex`).
    pub fn guess(domain: &str) -> Self {
        if domain.split('.').count() <= 2 {
            Method::Apex
        } else {
            Method::Subdomain
        }
    }
}

crate::string_enum!(
    /// `pending` until verified, then `active`.
    pub Status { Pending => "pending", Active => "active" }
);

/// A custom domain as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomDomain {
    pub id: i64,
    pub newsletter_id: i64,
    pub domain: String,
    pub method: Method,
    pub status: Status,
    pub verification_token: String,
    /// Why the last verification failed; `None` before the first check and once active.
    pub reason: Option<String>,
    pub checked_at: Option<Timestamp>,
    pub verified_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

impl CustomDomain {
    /// The name of the TXT record that proves control of the domain.
    pub fn txt_name(&self) -> String {
        format!("{VERIFY_LABEL}.{}", self.domain)
    }
}

/// One DNS record the owner adds at their DNS provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsRecord {
    /// `CNAME`, `A`, `AAAA` or `TXT`.
    pub kind: &'static str,
    pub name: String,
    pub value: String,
}

/// The columns `from_row` reads, spliced into each SELECT at compile time.
macro_rules! select_domain {
    ($tail:literal) => {
        concat!(
            "SELECT id, newsletter_id, domain, method, status, verification_token, reason, ",
            "checked_at, verified_at, created_at FROM custom_domains ",
            $tail
        )
    };
}

fn from_row(row: &Row<'_>) -> rusqlite::Result<CustomDomain> {
    Ok(CustomDomain {
        id: row.get(0)?,
        newsletter_id: row.get(1)?,
        domain: row.get(2)?,
        method: row.get(3)?,
        status: row.get(4)?,
        verification_token: row.get(5)?,
        reason: row.get(6)?,
        checked_at: row.get(7)?,
        verified_at: row.get(8)?,
        created_at: row.get(9)?,
    })
}

/// The newsletter's custom domain, if it has one (pending or active).
pub fn current(conn: &Connection, newsletter_id: i64) -> DomainResult<Option<CustomDomain>> {
    const SQL: &str = select_domain!("WHERE newsletter_id = ?1");
    Ok(conn.query_row(SQL, [newsletter_id], from_row).optional()?)
}

/// Custom domain `id` of `newsletter_id`; another newsletter's is `NotFound`.
pub fn get(conn: &Connection, newsletter_id: i64, id: i64) -> DomainResult<CustomDomain> {
    const SQL: &str = select_domain!("WHERE id = ?1 AND newsletter_id = ?2");
    conn.query_row(SQL, (id, newsletter_id), from_row)
        .optional()?
        .ok_or(DomainError::NotFound("custom domain"))
}

fn find_by_domain(conn: &Connection, domain: &str) -> DomainResult<Option<CustomDomain>> {
    const SQL: &str = select_domain!("WHERE domain = ?1");
    Ok(conn.query_row(SQL, [domain], from_row).optional()?)
}

/// Checks and normalises a submitted domain: lowercase, no scheme, path, port or trailing
/// dot; labels of a-z, 0-9 and inner hyphens; at least two labels; not an IP address, not a
/// special-use name, and not the service's own hosts or anything under them.
pub fn normalize_domain(raw: &str, urls: &SiteUrls) -> Result<String, String> {
    let mut text = raw.trim().to_lowercase();
    for scheme in ["https://", "http://"] {
        if let Some(rest) = text.strip_prefix(scheme) {
            text = rest.to_string();
        }
    }
    let text = text.trim_end_matches('/').trim_end_matches('.');
    if text.is_empty() {
        return Err("can't be blank".into());
    }
    let host = text.trim_start_matches('[').trim_end_matches(']');
    if host.parse::<IpAddr>().is_ok() || split_port(text).0.parse::<IpAddr>().is_ok() {
        return Err("must be a domain name, not an IP address".into());
    }
    if !text.is_ascii() {
        return Err(
            "must be written in ASCII; use the xn-- (punycode) form of an international name"
                .into(),
        );
    }
    if text.chars().count() > DOMAIN_MAX {
        return Err(format!("is too long (maximum is {DOMAIN_MAX} characters)"));
    }
    if text.contains([':', '/', '?', '#', '@', ' ']) {
        return Err(
            "must be a bare domain name such as www.example.com (no port, path or spaces)".into(),
        );
    }
    let labels: Vec<&str> = text.split('.').collect();
    if labels.len() < 2 {
        return Err("must have at least two labels, such as example.com".into());
    }
    for label in &labels {
        if label.is_empty() || label.len() > 63 {
            return Err("has an empty label or one longer than 63 characters".into());
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err("may contain only letters, digits, hyphens and dots".into());
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err("has a label that starts or ends with a hyphen".into());
        }
    }
    let top = labels[labels.len() - 1];
    if top.bytes().all(|b| b.is_ascii_digit()) {
        return Err("must be a domain name, not an IP address".into());
    }
    if SPECIAL_USE.contains(&top) {
        return Err(format!("cannot end in .{top}, which is not a public name"));
    }
    for own in [urls.public_host_name().to_string(), urls.base_host_name()] {
        let own = own.trim_end_matches('.');
        if !own.is_empty() && (text == own || text.ends_with(&format!(".{own}"))) {
            return Err(format!(
                "is {own} or under it, which Broadsheet serves itself"
            ));
        }
    }
    Ok(text.to_string())
}

/// Adds a custom domain to `newsletter_id`, `pending` with a fresh verification token.
/// `method` is `subdomain`, `apex`, or empty to guess from the domain.
pub fn create(
    conn: &mut Connection,
    urls: &SiteUrls,
    newsletter_id: i64,
    domain: &str,
    method: &str,
) -> DomainResult<CustomDomain> {
    let mut errors = FieldErrors::new();
    let domain = normalize_domain(domain, urls).unwrap_or_else(|message| {
        errors.add(FIELD, message);
        String::new()
    });
    let method = match method.trim() {
        "" => Some(Method::guess(&domain)),
        text => Method::parse(text),
    };
    match method {
        None => errors.add("method", "must be subdomain or apex"),
        Some(Method::Subdomain) if !domain.is_empty() && domain.split('.').count() == 2 => {
            errors.add(
                FIELD,
                format!("{domain} is an apex domain: DNS allows no CNAME there, so choose the apex method (A/AAAA records)"),
            )
        }
        _ => {}
    }
    errors.into_result()?;
    let method = method.expect("checked above");
    write_tx(conn, |tx| {
        newsletters::get(tx, newsletter_id)?.ensure_writable()?;
        if let Some(existing) = current(tx, newsletter_id)? {
            return Err(DomainError::invalid(
                FIELD,
                format!(
                    "can't be added: this newsletter already uses {}; remove it first",
                    existing.domain
                ),
            ));
        }
        if let Some(other) = find_by_domain(tx, &domain)? {
            if !is_stale_claim(&other) {
                return Err(DomainError::invalid(
                    FIELD,
                    "is already used by another newsletter",
                ));
            }
            const RELEASE: &str = "DELETE FROM custom_domains WHERE id = ?1";
            tx.execute(RELEASE, [other.id])?;
        }
        const INSERT: &str = "INSERT INTO custom_domains
             (newsletter_id, domain, method, verification_token, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)";
        tx.execute(
            INSERT,
            (
                newsletter_id,
                &domain,
                method,
                format!("broadsheet-verify={}", random_hex(16)),
                Timestamp::now(),
            ),
        )?;
        get(tx, newsletter_id, tx.last_insert_rowid())
    })
}

/// A pending claim older than [`STALE_CLAIM_DAYS`].
fn is_stale_claim(domain: &CustomDomain) -> bool {
    let cutoff = Timestamp::now() - crate::clock::days(STALE_CLAIM_DAYS);
    domain.status == Status::Pending && domain.created_at < cutoff
}

/// Removes the custom domain: its Host stops serving the site at once and links go back to
/// the subdomain.
pub fn remove(conn: &mut Connection, newsletter_id: i64, id: i64) -> DomainResult<CustomDomain> {
    write_tx(conn, |tx| {
        let domain = get(tx, newsletter_id, id)?;
        const DELETE: &str = "DELETE FROM custom_domains WHERE id = ?1 AND newsletter_id = ?2";
        tx.execute(DELETE, (id, newsletter_id))?;
        Ok(domain)
    })
}

/// The newsletter whose active custom domain is `host` (lowercase, without port); `None`
/// for a pending domain and for a name no newsletter uses.
pub fn newsletter_on_domain(conn: &Connection, host: &str) -> DomainResult<Option<Newsletter>> {
    match find_by_domain(conn, host.trim_end_matches('.'))? {
        Some(d) if d.status == Status::Active => Ok(Some(newsletters::get(conn, d.newsletter_id)?)),
        _ => Ok(None),
    }
}

/// Whether a reverse proxy may get a certificate for `host`: an active custom domain or a
/// `<subdomain>.<public-host>` of a newsletter whose site is live.
pub fn tls_allowed(conn: &Connection, urls: &SiteUrls, host: &str) -> DomainResult<bool> {
    let host = host.trim().trim_end_matches('.').to_lowercase();
    if host.is_empty() || host.len() > 253 {
        return Ok(false);
    }
    let newsletter = match subdomain_of(&host, urls.public_host_name()) {
        Some(subdomain) => match newsletters::get_by_subdomain(conn, subdomain) {
            Ok(n) => n,
            Err(DomainError::NotFound(_)) => return Ok(false),
            Err(e) => return Err(e),
        },
        None => match newsletter_on_domain(conn, &host)? {
            Some(n) => n,
            None => return Ok(false),
        },
    };
    Ok(newsletter.live_at.is_some())
}

/// The name the domain must point at: `<subdomain>.<public-host>` without a port.
pub fn target_host(urls: &SiteUrls, newsletter: &Newsletter) -> String {
    format!("{}.{}", newsletter.subdomain, urls.public_host_name())
}

/// The resolver used to verify domains and to find webhook receivers: `--dns-server`, or the
/// system's configuration.
#[derive(Debug, Clone, Default)]
pub struct Dns {
    server: Option<SocketAddr>,
}

impl Dns {
    /// `None` for the system resolver; else `IP` (port 53) or `IP:PORT` (`[v6]:PORT`).
    pub fn parse(server: Option<&str>) -> Result<Self, String> {
        let Some(text) = server.map(str::trim).filter(|t| !t.is_empty()) else {
            return Ok(Dns::default());
        };
        let address = text
            .parse::<SocketAddr>()
            .or_else(|_| text.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 53)))
            .map_err(|_| {
                format!("--dns-server must be an IP address with an optional port, not {text:?}")
            })?;
        Ok(Dns {
            server: Some(address),
        })
    }

    /// The addresses to connect to for `name` (a webhook receiver), in the order found. Unlike
    /// the checks of custom domains, the hosts file counts here, as it would for any program
    /// on this machine that connects.
    pub async fn connect_addresses(&self, name: &str) -> Result<Vec<IpAddr>, String> {
        let resolver = self.resolver(ResolveHosts::Always)?;
        match resolver.lookup_ip(format!("{}.", plain_name(name))).await {
            Ok(lookup) => {
                let mut found: Vec<IpAddr> = Vec::new();
                for ip in lookup.iter() {
                    if !found.contains(&ip) {
                        found.push(ip);
                    }
                }
                if found.is_empty() {
                    Err(format!("host {name} does not resolve"))
                } else {
                    Ok(found)
                }
            }
            Err(e) if e.is_no_records_found() || e.is_nx_domain() => {
                Err(format!("host {name} does not resolve"))
            }
            Err(e) => Err(format!("host {name} could not be resolved: {e}")),
        }
    }

    /// The TXT records at `name` (each record's strings joined), as the world sees them: a
    /// fresh resolver, without the hosts file.
    pub async fn txt(&self, name: &str) -> Answer<String> {
        match self.resolver(ResolveHosts::Never) {
            Ok(resolver) => lookup_txt(&resolver, name).await,
            Err(e) => Answer::Failed(e),
        }
    }

    /// A fresh resolver for each verification, so a record the owner just changed is seen
    /// (no answers cached from an earlier check).
    fn resolver(&self, hosts: ResolveHosts) -> Result<TokioResolver, String> {
        let mut builder = match self.server {
            Some(address) => {
                let mut server = NameServerConfig::udp_and_tcp(address.ip());
                for connection in &mut server.connections {
                    connection.port = address.port();
                }
                Resolver::builder_with_config(
                    ResolverConfig::from_name_servers(vec![server]),
                    TokioRuntimeProvider::default(),
                )
            }
            None => Resolver::builder_tokio()
                .map_err(|e| format!("cannot read the system's resolver configuration: {e}"))?,
        };
        let options = builder.options_mut();
        options.timeout = Duration::from_secs(3);
        options.attempts = 2;
        options.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        options.use_hosts_file = hosts;
        builder
            .build()
            .map_err(|e| format!("cannot start the DNS resolver: {e}"))
    }
}

/// What a DNS lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer<T> {
    Found(Vec<T>),
    /// NXDOMAIN, or the name has no record of that type.
    Missing,
    /// The resolver gave no answer (timeout, refused, server failure).
    Failed(String),
}

fn answer<T>(result: Result<Vec<T>, NetError>) -> Answer<T> {
    match result {
        Ok(values) if values.is_empty() => Answer::Missing,
        Ok(values) => Answer::Found(values),
        Err(e) if e.is_no_records_found() || e.is_nx_domain() => Answer::Missing,
        Err(e) => Answer::Failed(e.to_string()),
    }
}

/// A name as compared: lowercase without the root dot.
fn plain_name(name: &str) -> String {
    name.trim_end_matches('.').to_lowercase()
}

async fn lookup_cname(resolver: &TokioResolver, name: &str) -> Answer<String> {
    let result = resolver
        .lookup(format!("{name}."), RecordType::CNAME)
        .await
        .map(|lookup| {
            lookup
                .answers()
                .iter()
                .filter(|r| plain_name(&r.name.to_ascii()) == name)
                .filter_map(|r| match &r.data {
                    RData::CNAME(target) => Some(plain_name(&target.0.to_ascii())),
                    _ => None,
                })
                .collect()
        });
    answer(result)
}

async fn lookup_txt(resolver: &TokioResolver, name: &str) -> Answer<String> {
    let result = resolver
        .lookup(format!("{name}."), RecordType::TXT)
        .await
        .map(|lookup| {
            lookup
                .answers()
                .iter()
                .filter_map(|r| match &r.data {
                    RData::TXT(txt) => Some(
                        txt.txt_data
                            .iter()
                            .map(|part| String::from_utf8_lossy(part).into_owned())
                            .collect::<String>(),
                    ),
                    _ => None,
                })
                .collect()
        });
    answer(result)
}

async fn lookup_addresses(resolver: &TokioResolver, name: &str) -> Answer<IpAddr> {
    let result = resolver
        .lookup_ip(format!("{name}."))
        .await
        .map(|lookup| lookup.iter().collect::<BTreeSet<_>>().into_iter().collect());
    answer(result)
}

/// The records to add at the DNS provider. For an apex domain they copy the addresses the
/// target resolves to now; when it does not resolve, one line says so.
pub async fn records_to_add(
    dns: &Dns,
    urls: &SiteUrls,
    newsletter: &Newsletter,
    domain: &CustomDomain,
) -> Vec<DnsRecord> {
    let target = target_host(urls, newsletter);
    let mut records = match domain.method {
        Method::Subdomain => vec![DnsRecord {
            kind: "CNAME",
            name: domain.domain.clone(),
            value: format!("{target}."),
        }],
        Method::Apex => {
            // What the world sees counts, not this machine's /etc/hosts.
            let found = match dns.resolver(ResolveHosts::Never) {
                Ok(resolver) => lookup_addresses(&resolver, &target).await,
                Err(e) => Answer::Failed(e),
            };
            match found {
                Answer::Found(addresses) => address_records(&domain.domain, &addresses),
                Answer::Missing | Answer::Failed(_) => vec![DnsRecord {
                    kind: "A/AAAA",
                    name: domain.domain.clone(),
                    value: format!("the addresses of {target} (it does not resolve right now)"),
                }],
            }
        }
    };
    records.push(DnsRecord {
        kind: "TXT",
        name: domain.txt_name(),
        value: domain.verification_token.clone(),
    });
    records
}

fn address_records(name: &str, addresses: &[IpAddr]) -> Vec<DnsRecord> {
    addresses
        .iter()
        .map(|ip| DnsRecord {
            kind: if ip.is_ipv4() { "A" } else { "AAAA" },
            name: name.to_string(),
            value: ip.to_string(),
        })
        .collect()
}

/// What verification found in DNS for one domain.
#[derive(Debug, Clone)]
pub struct Observed {
    pub txt: Answer<String>,
    /// For the subdomain method.
    pub cname: Answer<String>,
    /// For the apex method: the domain's addresses and the target's.
    pub addresses: Answer<IpAddr>,
    pub target_addresses: Answer<IpAddr>,
}

/// Looks the records up, in parallel so a slow resolver costs one timeout, not three.
async fn observe(dns: &Dns, domain: &CustomDomain, target: &str) -> Result<Observed, String> {
    // What the world sees counts, not this machine's /etc/hosts.
    let resolver = dns.resolver(ResolveHosts::Never)?;
    let txt_name = domain.txt_name();
    Ok(match domain.method {
        Method::Subdomain => {
            let (txt, cname) = tokio::join!(
                lookup_txt(&resolver, &txt_name),
                lookup_cname(&resolver, &domain.domain)
            );
            Observed {
                txt,
                cname,
                addresses: Answer::Missing,
                target_addresses: Answer::Missing,
            }
        }
        Method::Apex => {
            let (txt, addresses, target_addresses) = tokio::join!(
                lookup_txt(&resolver, &txt_name),
                lookup_addresses(&resolver, &domain.domain),
                lookup_addresses(&resolver, target)
            );
            Observed {
                txt,
                cname: Answer::Missing,
                addresses,
                target_addresses,
            }
        }
    })
}

/// `Ok` when the records are right; else every reason, for people.
pub fn judge(domain: &CustomDomain, target: &str, seen: &Observed) -> Result<(), String> {
    let mut reasons = Vec::new();
    match domain.method {
        Method::Subdomain => match &seen.cname {
            Answer::Found(names) if names.iter().any(|n| n == target) => {}
            Answer::Found(names) => reasons.push(format!(
                "CNAME {} points to {}, expected {target}",
                domain.domain,
                names.join(", ")
            )),
            Answer::Missing => reasons.push(format!(
                "CNAME record {} not found (it should point to {target})",
                domain.domain
            )),
            Answer::Failed(e) => {
                reasons.push(format!("the CNAME lookup of {} failed: {e}", domain.domain))
            }
        },
        Method::Apex => match (&seen.addresses, &seen.target_addresses) {
            (_, Answer::Missing) => reasons.push(format!(
                "{target} does not resolve, so there are no addresses to compare with"
            )),
            (_, Answer::Failed(e)) => {
                reasons.push(format!("the address lookup of {target} failed: {e}"))
            }
            (Answer::Found(found), Answer::Found(expected)) => {
                let wrong: Vec<String> = found
                    .iter()
                    .filter(|ip| !expected.contains(ip))
                    .map(IpAddr::to_string)
                    .collect();
                if !wrong.is_empty() {
                    reasons.push(format!(
                        "{} has address {}, expected {}",
                        domain.domain,
                        wrong.join(", "),
                        list(expected)
                    ));
                }
            }
            (Answer::Missing, Answer::Found(expected)) => reasons.push(format!(
                "A/AAAA records for {} not found (they should be {})",
                domain.domain,
                list(expected)
            )),
            (Answer::Failed(e), Answer::Found(_)) => reasons.push(format!(
                "the address lookup of {} failed: {e}",
                domain.domain
            )),
        },
    }
    let token = &domain.verification_token;
    match &seen.txt {
        Answer::Found(values) if values.iter().any(|v| v.trim() == token) => {}
        Answer::Found(values) => reasons.push(format!(
            "TXT record {} holds \"{}\", expected \"{token}\"",
            domain.txt_name(),
            values.join("\", \"")
        )),
        Answer::Missing => reasons.push(format!("TXT record {} not found", domain.txt_name())),
        Answer::Failed(e) => reasons.push(format!(
            "the TXT lookup of {} failed: {e}",
            domain.txt_name()
        )),
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(reasons.join("; "))
    }
}

fn list(addresses: &[IpAddr]) -> String {
    addresses
        .iter()
        .map(IpAddr::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Looks the records up and records the outcome: `active` when both are right, else it
/// stays `pending` with the reason. An active domain is returned as it is.
pub async fn verify(
    db: &Db,
    dns: &Dns,
    urls: &SiteUrls,
    newsletter: &Newsletter,
    id: i64,
) -> DomainResult<CustomDomain> {
    let newsletter_id = newsletter.id;
    let domain = db.run(move |conn| get(conn, newsletter_id, id)).await?;
    if domain.status == Status::Active {
        return Ok(domain);
    }
    let target = target_host(urls, newsletter);
    let outcome = match observe(dns, &domain, &target).await {
        Ok(seen) => judge(&domain, &target, &seen),
        Err(e) => Err(e),
    };
    db.run(move |conn| record_outcome(conn, &domain, outcome))
        .await
}

fn record_outcome(
    conn: &mut Connection,
    domain: &CustomDomain,
    outcome: Result<(), String>,
) -> DomainResult<CustomDomain> {
    write_tx(conn, |tx| {
        let now = Timestamp::now();
        // The token guards against a domain removed and added again meanwhile.
        const UPDATE: &str = "UPDATE custom_domains
             SET status = ?4, reason = ?5, checked_at = ?6, updated_at = ?6,
                 verified_at = CASE WHEN ?4 = 'active' THEN ?6 ELSE verified_at END
             WHERE id = ?1 AND newsletter_id = ?2 AND verification_token = ?3 AND status = 'pending'";
        let (status, reason) = match &outcome {
            Ok(()) => (Status::Active, None),
            Err(reason) => (Status::Pending, Some(reason.as_str())),
        };
        tx.execute(
            UPDATE,
            (
                domain.id,
                domain.newsletter_id,
                &domain.verification_token,
                status,
                reason,
                &now,
            ),
        )?;
        get(tx, domain.newsletter_id, domain.id)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::testing::db_with_newsletter;

    fn urls() -> SiteUrls {
        SiteUrls::new("https://app.example.net", "news.example.net")
    }

    #[test]
    fn normalizes_and_refuses_domains() {
        let urls = urls();
        for (raw, want) in [
            ("www.Example.com", "www.example.com"),
            (" https://news.example.org/ ", "news.example.org"),
            ("example.com.", "example.com"),
            ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ] {
            assert_eq!(normalize_domain(raw, &urls).as_deref(), Ok(want), "{raw}");
        }
        for (raw, why) in [
            ("", "blank"),
            ("192.0.2.1", "IP address"),
            ("[2001:db8::1]", "IP address"),
            ("10.0.0.1:80", "IP address"),
            ("1.2.3.4.5", "IP address"),
            ("localhost", "two labels"),
            ("com", "two labels"),
            ("shop.localhost", ".localhost"),
            ("bücher.example", "ASCII"),
            ("www.example.com:8080", "bare domain"),
            ("www.example.com/path", "bare domain"),
            ("a b.example.com", "bare domain"),
            ("under_score.example.com", "letters, digits"),
            ("-bad.example.com", "hyphen"),
            ("a..example.com", "empty label"),
            ("news.example.net", "Broadsheet serves itself"),
            ("weekly.news.example.net", "Broadsheet serves itself"),
            ("app.example.net", "Broadsheet serves itself"),
            ("'; DROP TABLE custom_domains; --", "bare domain"),
        ] {
            let message = normalize_domain(raw, &urls).expect_err(raw);
            assert!(message.contains(why), "{raw}: {message}");
        }
        let long = format!("{}.example.com", vec!["a".repeat(63); 4].join("."));
        assert!(
            normalize_domain(&long, &urls)
                .unwrap_err()
                .contains("too long")
        );
        assert!(
            normalize_domain(&format!("{}.com", "a".repeat(64)), &urls)
                .unwrap_err()
                .contains("63")
        );
    }

    #[test]
    fn one_domain_per_newsletter_and_per_service() {
        let mut conn = db_with_newsletter("free");
        conn.execute_batch(
            "INSERT INTO newsletters (owner_id, name, subdomain, tier, bounce_token, created_at, updated_at)
             VALUES (1, 'M', 'm', 'free', 'bt2', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
        )
        .unwrap();
        let urls = urls();
        let first = create(&mut conn, &urls, 1, "www.example.com", "").unwrap();
        assert_eq!(first.method, Method::Subdomain);
        assert_eq!(first.status, Status::Pending);
        assert!(first.verification_token.starts_with("broadsheet-verify="));
        let again = create(&mut conn, &urls, 1, "news.example.org", "subdomain");
        assert!(matches!(again, Err(DomainError::Invalid(..))));
        let taken = create(&mut conn, &urls, 2, "WWW.example.com", "subdomain");
        assert!(
            taken
                .unwrap_err()
                .to_string()
                .contains("another newsletter")
        );
        let apex_cname = create(&mut conn, &urls, 2, "example.org", "subdomain");
        assert!(apex_cname.unwrap_err().to_string().contains("apex"));
        let bad_method = create(&mut conn, &urls, 2, "example.org", "mx");
        assert!(bad_method.unwrap_err().to_string().contains("Method"));

        // An unverified claim gives way after a week.
        conn.execute(
            "UPDATE custom_domains SET created_at = '2000-01-01T00:00:00.000Z'",
            [],
        )
        .unwrap();
        let taken_over = create(&mut conn, &urls, 2, "www.example.com", "").unwrap();
        assert_eq!(taken_over.newsletter_id, 2);
        assert!(current(&conn, 1).unwrap().is_none());
        assert!(get(&conn, 1, taken_over.id).is_err(), "not newsletter 1's");
    }

    fn pending(method: Method) -> CustomDomain {
        CustomDomain {
            id: 1,
            newsletter_id: 1,
            domain: if method == Method::Apex {
                "example.com".into()
            } else {
                "www.example.com".into()
            },
            method,
            status: Status::Pending,
            verification_token: "broadsheet-verify=abc".into(),
            reason: None,
            checked_at: None,
            verified_at: None,
            created_at: Timestamp::now(),
        }
    }

    #[test]
    fn judges_cname_and_txt() {
        let d = pending(Method::Subdomain);
        let target = "weekly.news.example.net";
        let mut seen = Observed {
            txt: Answer::Missing,
            cname: Answer::Missing,
            addresses: Answer::Missing,
            target_addresses: Answer::Missing,
        };
        let reason = judge(&d, target, &seen).unwrap_err();
        assert!(
            reason.contains("CNAME record www.example.com not found"),
            "{reason}"
        );
        assert!(reason.contains("TXT record _broadsheet-verify.www.example.com not found"));
        seen.cname = Answer::Found(vec!["elsewhere.example.org".into()]);
        seen.txt = Answer::Found(vec!["something else".into()]);
        let reason = judge(&d, target, &seen).unwrap_err();
        assert!(
            reason.contains(
                "CNAME www.example.com points to elsewhere.example.org, expected weekly.news.example.net"
            ),
            "{reason}"
        );
        assert!(reason.contains("holds \"something else\""), "{reason}");
        seen.cname = Answer::Found(vec![target.into()]);
        seen.txt = Answer::Found(vec!["other".into(), "broadsheet-verify=abc".into()]);
        assert_eq!(judge(&d, target, &seen), Ok(()));
        seen.txt = Answer::Failed("timed out".into());
        assert!(judge(&d, target, &seen).unwrap_err().contains("timed out"));
    }

    #[test]
    fn judges_apex_addresses() {
        let d = pending(Method::Apex);
        let target = "weekly.news.example.net";
        let v4: IpAddr = "192.0.2.10".parse().unwrap();
        let v6: IpAddr = "2001:db8::10".parse().unwrap();
        let other: IpAddr = "198.51.100.7".parse().unwrap();
        let mut seen = Observed {
            txt: Answer::Found(vec!["broadsheet-verify=abc".into()]),
            cname: Answer::Missing,
            addresses: Answer::Missing,
            target_addresses: Answer::Found(vec![v4, v6]),
        };
        let reason = judge(&d, target, &seen).unwrap_err();
        assert!(
            reason.contains("A/AAAA records for example.com not found"),
            "{reason}"
        );
        assert!(reason.contains("192.0.2.10, 2001:db8::10"), "{reason}");
        seen.addresses = Answer::Found(vec![v4, other]);
        let reason = judge(&d, target, &seen).unwrap_err();
        assert!(
            reason.contains("example.com has address 198.51.100.7"),
            "{reason}"
        );
        seen.addresses = Answer::Found(vec![v4]);
        assert_eq!(
            judge(&d, target, &seen),
            Ok(()),
            "an A record alone is enough"
        );
        seen.target_addresses = Answer::Missing;
        assert!(
            judge(&d, target, &seen)
                .unwrap_err()
                .contains("does not resolve")
        );
    }

    #[test]
    fn parses_the_dns_server_flag() {
        assert!(Dns::parse(None).unwrap().server.is_none());
        assert_eq!(
            Dns::parse(Some("127.0.0.1:5353")).unwrap().server,
            Some("127.0.0.1:5353".parse().unwrap())
        );
        assert_eq!(
            Dns::parse(Some("9.9.9.9")).unwrap().server,
            Some("9.9.9.9:53".parse().unwrap())
        );
        assert!(Dns::parse(Some("dns.example.com")).is_err());
    }

    #[test]
    fn tls_is_allowed_for_live_subdomains_and_active_domains_only() {
        let mut conn = db_with_newsletter("free");
        let urls = urls();
        assert!(
            !tls_allowed(&conn, &urls, "n.news.example.net").unwrap(),
            "not live yet"
        );
        conn.execute(
            "UPDATE newsletters SET live_at = '2026-01-01T00:00:00.000Z'",
            [],
        )
        .unwrap();
        assert!(tls_allowed(&conn, &urls, "N.news.example.net.").unwrap());
        assert!(!tls_allowed(&conn, &urls, "x.news.example.net").unwrap());
        let d = create(&mut conn, &urls, 1, "www.example.com", "").unwrap();
        assert!(
            !tls_allowed(&conn, &urls, "www.example.com").unwrap(),
            "pending"
        );
        record_outcome(&mut conn, &d, Ok(())).unwrap();
        assert!(tls_allowed(&conn, &urls, "www.example.com").unwrap());
        assert_eq!(
            newsletters::get(&conn, 1).unwrap().site_origin(&urls),
            "https://www.example.com"
        );
        for junk in ["", "news.example.net", "example.com", &"a".repeat(300)] {
            assert!(!tls_allowed(&conn, &urls, junk).unwrap(), "{junk}");
        }
        remove(&mut conn, 1, d.id).unwrap();
        assert!(!tls_allowed(&conn, &urls, "www.example.com").unwrap());
        assert_eq!(
            newsletters::get(&conn, 1).unwrap().site_origin(&urls),
            "https://n.news.example.net"
        );
    }
}
