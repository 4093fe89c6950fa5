//! Third parties' secrets at rest: the password of a newsletter's own mail relay (its owner's
//! ESP account) is stored sealed with ChaCha20-Poly1305 (`ring::aead`), under a key kept in a
//! file of the data directory (`credentials.key`, 32 random bytes, mode 0600), never in the
//! database. A copy of the database alone, a backup or a Litestream replica, reveals none of
//! them; with the key file beside it, it does, which is why `broadsheet backup` tells the
//! operator to carry the key apart from the copy (docs/operations.md).
//!
//! A sealed value is `[1][key id, 8 bytes][nonce, 12 bytes][ciphertext and tag]`: the version
//! and the key id are authenticated with it, a fresh random nonce is drawn for every value,
//! and the key id (a hash of the key, which reveals nothing of it) tells a value sealed with
//! another key (the database was moved without its key file) from a damaged one.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use sha2::{Digest, Sha256};

/// The key file's name in the data directory.
pub const KEY_FILE: &str = "credentials.key";

const KEY_LEN: usize = 32;
const VERSION: u8 = 1;
const KEY_ID_LEN: usize = 8;
const HEADER_LEN: usize = 1 + KEY_ID_LEN;

/// Where the key of `data_dir` is kept.
pub fn key_file(data_dir: &Path) -> PathBuf {
    data_dir.join(KEY_FILE)
}

/// The key that seals and opens stored credentials. Cheap to clone.
#[derive(Clone)]
pub struct CredentialKey {
    key: Arc<LessSafeKey>,
    id: [u8; KEY_ID_LEN],
}

impl std::fmt::Debug for CredentialKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CredentialKey")
            .field("id", &hex::encode(self.id))
            .finish_non_exhaustive()
    }
}

/// Why a sealed value could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    /// Sealed with another key than this server's key file.
    OtherKey,
    /// Not a value this code sealed, or altered since.
    Damaged,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unreadable::OtherKey => "it was sealed with another key than this server's key file",
            Unreadable::Damaged => "the stored value is damaged",
        })
    }
}

impl std::error::Error for Unreadable {}

/// What [`CredentialKey::load_or_create`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// The key file was there.
    Existing,
    /// There was none: a new key was written.
    Created,
}

impl CredentialKey {
    /// A key from its 32 bytes.
    pub fn from_bytes(bytes: &[u8; KEY_LEN]) -> Self {
        let unbound =
            UnboundKey::new(&CHACHA20_POLY1305, bytes).expect("a 32-byte ChaCha20-Poly1305 key");
        let digest = Sha256::new()
            .chain_update(b"broadsheet credentials key id\0")
            .chain_update(bytes)
            .finalize();
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(&digest[..KEY_ID_LEN]);
        CredentialKey {
            key: Arc::new(LessSafeKey::new(unbound)),
            id,
        }
    }

    /// A new random key (not written anywhere).
    pub fn generate() -> Result<Self, String> {
        Ok(Self::from_bytes(&random_key()?))
    }

    /// The key in `path`, or a new one written there (mode 0600, created only if absent, so
    /// two processes starting at once agree on one key). A file that is not 32 bytes is an
    /// error: it is never replaced, since the passwords sealed with it would be lost.
    pub fn load_or_create(path: &Path) -> Result<(Self, KeySource), String> {
        match Self::load(path)? {
            Some(key) => Ok((key, KeySource::Existing)),
            None => Self::create(path),
        }
    }

    /// The key in `path`; `None` when there is no such file (nothing is written).
    pub fn load(path: &Path) -> Result<Option<Self>, String> {
        match std::fs::read(path) {
            Ok(bytes) => Self::from_file_bytes(path, &bytes).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("cannot read the key file {}: {e}", path.display())),
        }
    }

    fn from_file_bytes(path: &Path, bytes: &[u8]) -> Result<Self, String> {
        let key: &[u8; KEY_LEN] = bytes.try_into().map_err(|_| {
            format!(
                "{} is not a key file Broadsheet wrote ({} bytes, not {KEY_LEN}); put the \
                 right one back, or move it away to start a new key (the relay passwords \
                 stored so far then have to be entered again)",
                path.display(),
                bytes.len()
            )
        })?;
        Ok(Self::from_bytes(key))
    }

    fn create(path: &Path) -> Result<(Self, KeySource), String> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let bytes = random_key()?;
        let cannot =
            |e: std::io::Error| format!("cannot write the key file {}: {e}", path.display());
        let mut file = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(file) => file,
            // Another process wrote it first: use that one.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let bytes = std::fs::read(path).map_err(cannot)?;
                return Ok((Self::from_file_bytes(path, &bytes)?, KeySource::Existing));
            }
            Err(e) => return Err(cannot(e)),
        };
        file.write_all(&bytes).map_err(cannot)?;
        file.sync_all().map_err(cannot)?;
        if let Some(dir) = path.parent() {
            // The new name is durable too, not only the bytes.
            let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
        }
        Ok((Self::from_bytes(&bytes), KeySource::Created))
    }

    /// This key's id, as sealed values carry it.
    pub fn id(&self) -> [u8; KEY_ID_LEN] {
        self.id
    }

    /// `plaintext` sealed under a fresh random nonce.
    pub fn seal(&self, plaintext: &str) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .expect("the system's random number generator works");
        let mut sealed = Vec::with_capacity(HEADER_LEN + NONCE_LEN + plaintext.len() + 16);
        sealed.push(VERSION);
        sealed.extend_from_slice(&self.id);
        let header: [u8; HEADER_LEN] = sealed[..].try_into().expect("the header's length");
        sealed.extend_from_slice(&nonce);
        let mut in_out = plaintext.as_bytes().to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(header),
                &mut in_out,
            )
            .expect("ChaCha20-Poly1305 seals any value under 256 GB");
        sealed.extend_from_slice(&in_out);
        sealed
    }

    /// The text [`Self::seal`] sealed, if this key sealed it and nothing changed since.
    pub fn open(&self, sealed: &[u8]) -> Result<String, Unreadable> {
        if sealed.len() < HEADER_LEN + NONCE_LEN || sealed[0] != VERSION {
            return Err(Unreadable::Damaged);
        }
        let (header, rest) = sealed.split_at(HEADER_LEN);
        if header[1..] != self.id {
            return Err(Unreadable::OtherKey);
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| Unreadable::Damaged)?;
        let mut in_out = ciphertext.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(header), &mut in_out)
            .map_err(|_| Unreadable::Damaged)?;
        String::from_utf8(plain.to_vec()).map_err(|_| Unreadable::Damaged)
    }
}

/// A warning when the key file at `path` can be read by other users than its owner.
pub fn loose_mode(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| {
        format!(
            "the key file {} can be read by other users (mode {mode:o}); `chmod 600` it",
            path.display()
        )
    })
}

fn random_key() -> Result<[u8; KEY_LEN], String> {
    let mut bytes = [0u8; KEY_LEN];
    SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| "the system's random number generator failed".to_string())?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_hides_the_text_and_opens_only_with_its_key() {
        let key = CredentialKey::generate().unwrap();
        let secret = "correct horse battery staple";
        let sealed = key.seal(secret);
        assert!(
            !sealed.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "the plaintext is not in the sealed value"
        );
        assert!(!sealed.windows(5).any(|w| w == b"horse"));
        assert_eq!(key.open(&sealed).unwrap(), secret);

        // A fresh nonce each time: the same text seals differently.
        assert_ne!(key.seal(secret), sealed);

        let other = CredentialKey::generate().unwrap();
        assert_eq!(other.open(&sealed), Err(Unreadable::OtherKey));

        // A changed byte anywhere (header, nonce, ciphertext, tag) is refused.
        for at in [0, 3, HEADER_LEN + 1, sealed.len() - 1] {
            let mut altered = sealed.clone();
            altered[at] ^= 1;
            assert!(key.open(&altered).is_err(), "byte {at} altered");
        }
        assert_eq!(key.open(b"short"), Err(Unreadable::Damaged));
        assert_eq!(key.open(&key.seal("")).unwrap(), "");
    }

    #[test]
    fn the_key_file_is_made_once_with_mode_0600() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!(
            "broadsheet-credentials-{}-{}",
            std::process::id(),
            crate::domain::values::secrets::random_hex(4)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = key_file(&dir);
        let (made, source) = CredentialKey::load_or_create(&path).unwrap();
        assert_eq!(source, KeySource::Created);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(loose_mode(&path), None);
        assert_eq!(std::fs::read(&path).unwrap().len(), KEY_LEN);
        let (again, source) = CredentialKey::load_or_create(&path).unwrap();
        assert_eq!(source, KeySource::Existing);
        assert_eq!(again.open(&made.seal("x")).unwrap(), "x");

        std::fs::write(&path, b"not a key").unwrap();
        let error = CredentialKey::load_or_create(&path).unwrap_err();
        assert!(error.contains("9 bytes"), "{error}");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            b"not a key",
            "never replaced"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
