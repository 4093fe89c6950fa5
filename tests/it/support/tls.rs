//! A private CA and a server certificate it signs for `localhost` and 127.0.0.1, made afresh
//! by rcgen for each test: the TLS SMTP listener presents the certificate, and `--smtp-ca`
//! points at the CA's PEM file.

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use super::smtp::SinkTls;

pub struct TestCa {
    /// The CA certificate as a PEM file, for `--smtp-ca`.
    pub ca_file: PathBuf,
    /// Presents the server certificate and the CA's.
    pub server: Arc<rustls::ServerConfig>,
    _dir: tempfile::TempDir,
}

impl TestCa {
    pub fn new() -> Self {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "Broadsheet test CA");
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().unwrap();
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);

        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "test-sink");
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();

        let dir = tempfile::Builder::new()
            .prefix("broadsheet-ca-")
            .tempdir()
            .unwrap();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, ca_cert.pem()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone(), ca_cert.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap();
        TestCa {
            ca_file,
            server: Arc::new(server),
            _dir: dir,
        }
    }

    /// `--smtp-ca <file>`'s value.
    pub fn ca_path(&self) -> &str {
        self.ca_file.to_str().unwrap()
    }

    /// STARTTLS on a plain start (`implicit: false`), or TLS from the first byte.
    pub fn sink_tls(&self, implicit: bool) -> SinkTls {
        SinkTls {
            config: self.server.clone(),
            implicit,
        }
    }
}
