//! A small authoritative DNS server on a random UDP port of 127.0.0.1, for `serve
//! --dns-server`: it answers the records a test sets (and may change at any time) and says
//! NXDOMAIN for names it has none for. Messages are encoded with hickory-proto.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};

/// A record the server can answer.
#[derive(Debug, Clone)]
pub enum Rec {
    Cname(String),
    Txt(String),
    Addr(IpAddr),
}

impl Rec {
    fn record_type(&self) -> RecordType {
        match self {
            Rec::Cname(_) => RecordType::CNAME,
            Rec::Txt(_) => RecordType::TXT,
            Rec::Addr(IpAddr::V4(_)) => RecordType::A,
            Rec::Addr(IpAddr::V6(_)) => RecordType::AAAA,
        }
    }

    fn rdata(&self) -> RData {
        match self {
            Rec::Cname(target) => RData::CNAME(CNAME(
                Name::from_ascii(format!("{}.", target.trim_end_matches('.'))).expect("a name"),
            )),
            // A character-string holds 255 bytes at most: a longer value (a DKIM key) is
            // several strings, as DNS providers publish it.
            Rec::Txt(text) => RData::TXT(TXT::new(
                text.as_bytes()
                    .chunks(255)
                    .map(|part| String::from_utf8_lossy(part).into_owned())
                    .collect(),
            )),
            Rec::Addr(IpAddr::V4(ip)) => RData::A(A(*ip)),
            Rec::Addr(IpAddr::V6(ip)) => RData::AAAA(AAAA(*ip)),
        }
    }
}

type Zone = HashMap<String, Vec<Rec>>;

/// The running server; stops when dropped.
pub struct DnsServer {
    pub addr: SocketAddr,
    zone: Arc<Mutex<Zone>>,
    queries: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn key(name: &str) -> String {
    name.trim_end_matches('.').to_lowercase()
}

impl DnsServer {
    pub fn start() -> Self {
        let socket = UdpSocket::bind("127.0.0.1:0").expect("a UDP port for the DNS server");
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let addr = socket.local_addr().unwrap();
        let zone = Arc::new(Mutex::new(Zone::new()));
        let queries = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (zone, queries, stop) = (zone.clone(), queries.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while !stop.load(Ordering::SeqCst) {
                    let Ok((len, from)) = socket.recv_from(&mut buf) else {
                        continue;
                    };
                    let Ok(request) = Message::from_vec(&buf[..len]) else {
                        continue;
                    };
                    queries.fetch_add(1, Ordering::SeqCst);
                    let answer = respond(&request, &zone.lock().unwrap());
                    if let Ok(bytes) = answer.to_vec() {
                        let _ = socket.send_to(&bytes, from);
                    }
                }
            })
        };
        DnsServer {
            addr,
            zone,
            queries,
            stop,
            thread: Some(thread),
        }
    }

    /// `127.0.0.1:<port>`, for `--dns-server`.
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// Replaces the records of `name` (empty: the name no longer exists).
    pub fn set(&self, name: &str, records: &[Rec]) {
        let mut zone = self.zone.lock().unwrap();
        if records.is_empty() {
            zone.remove(&key(name));
        } else {
            zone.insert(key(name), records.to_vec());
        }
    }

    /// Queries answered so far.
    pub fn queries(&self) -> usize {
        self.queries.load(Ordering::SeqCst)
    }
}

fn respond(request: &Message, zone: &Zone) -> Message {
    let mut response = Message::response(request.metadata.id, request.metadata.op_code);
    response.metadata.message_type = MessageType::Response;
    response.metadata.authoritative = true;
    response.metadata.recursion_desired = request.metadata.recursion_desired;
    response.metadata.recursion_available = true;
    for query in &request.queries {
        response.add_query(query.clone());
        let Some(records) = zone.get(&key(&query.name().to_ascii())) else {
            response.metadata.response_code = ResponseCode::NXDomain;
            continue;
        };
        for rec in records {
            // A name with a CNAME answers every type with it, as real servers do.
            if rec.record_type() == query.query_type() || matches!(rec, Rec::Cname(_)) {
                response.add_answer(Record::from_rdata(query.name().clone(), 1, rec.rdata()));
            }
        }
    }
    response
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
