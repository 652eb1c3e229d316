//! End-to-end encryption of synced events (docs/sync.md, "Crypto").
//!
//! A space has a random 32-byte key, shown once as a 24-word BIP-39 recovery phrase. Everything
//! the server stores is derived from it or sealed under it:
//! * the space id and the key id (its fingerprint) are domain-separated SHA-256 hashes of the
//!   key, so a joining device finds its space from the phrase alone and the server learns
//!   nothing it could turn back into the key;
//! * an event's id on the server is a keyed hash of its local id: unique and stable (so a
//!   re-push is idempotent) without showing the local id;
//! * each event is sealed with XChaCha20-Poly1305 under its own random content key, which is
//!   itself sealed under the space key (the wrapping that lets team keys rotate later); the
//!   associated data binds (space, device, seq, event id, key id), so a row moved to another
//!   place on the server no longer opens;
//! * the space's key-check record is an AEAD canary under the key: `join` opens it to tell a
//!   wrong phrase from a right one before changing anything.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use sha2::{Digest, Sha256};

/// The length of a space key and of a content key.
pub const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
/// The format of a sealed event: `VERSION | wrap nonce | wrapped content key | nonce | body`.
const VERSION: u8 = 1;
const CANARY: &[u8] = b"nmem key check v1";

/// A space key (zeroed on drop would need a dependency; it lives in the daemon's own memory).
#[derive(Clone, PartialEq, Eq)]
pub struct SpaceKey(pub [u8; KEY_LEN]);

impl std::fmt::Debug for SpaceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SpaceKey({})", self.key_id())
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CryptoError {
    #[error("the recovery phrase is not valid: {0} (it is the 24 words `nmem sync enable` printed, separated by spaces)")]
    BadPhrase(String),
    #[error(
        "the recovery phrase holds {0} bytes of key, not 32: it is not an nmem space's phrase"
    )]
    WrongLength(usize),
    #[error("the data does not open with this space's key (a wrong key, or it was changed)")]
    Open,
    #[error("the system's random source failed")]
    Random,
    #[error(
        "`{0}` is not a member's public key ({1}): it is the `age1…` line `nmem sync identity` \
         prints on the member's device"
    )]
    BadPublicKey(String, String),
    #[error("this device's stored identity is damaged ({0})")]
    BadIdentity(String),
}

/// Fill `buf` from the kernel's random source (`getrandom(2)`, blocking until it is seeded).
pub fn random(buf: &mut [u8]) -> Result<(), CryptoError> {
    let mut done = 0;
    while done < buf.len() {
        // SAFETY: getrandom writes at most the given length into the given buffer.
        let got = unsafe { libc::getrandom(buf[done..].as_mut_ptr().cast(), buf.len() - done, 0) };
        if got < 0 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(CryptoError::Random);
        }
        done += got as usize;
    }
    Ok(())
}

/// 16 random bytes as 32 hex digits (device ids).
pub fn random_id() -> Result<String, CryptoError> {
    let mut b = [0u8; 16];
    random(&mut b)?;
    Ok(hex(&b))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn hash(domain: &str, parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(domain.as_bytes());
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    h.finalize().into()
}

impl SpaceKey {
    pub fn generate() -> Result<SpaceKey, CryptoError> {
        let mut k = [0u8; KEY_LEN];
        random(&mut k)?;
        Ok(SpaceKey(k))
    }

    pub fn from_slice(b: &[u8]) -> Result<SpaceKey, CryptoError> {
        <[u8; KEY_LEN]>::try_from(b)
            .map(SpaceKey)
            .map_err(|_| CryptoError::WrongLength(b.len()))
    }

    /// The 24 words that give the key back.
    pub fn phrase(&self) -> String {
        bip39::Mnemonic::from_entropy(&self.0)
            .expect("32 bytes is a valid BIP-39 entropy length")
            .to_string()
    }

    /// The key of a recovery phrase (words separated by any white space, any case).
    pub fn from_phrase(phrase: &str) -> Result<SpaceKey, CryptoError> {
        let words: Vec<String> = phrase
            .split_whitespace()
            .map(|w| w.to_lowercase())
            .collect();
        let m = bip39::Mnemonic::parse_normalized(&words.join(" "))
            .map_err(|e| CryptoError::BadPhrase(e.to_string()))?;
        SpaceKey::from_slice(&m.to_entropy())
    }

    /// The space this key belongs to (what the server calls it).
    pub fn space_id(&self) -> String {
        hex(&hash("nmem-sync space id v1", &[&self.0])[..16])
    }

    /// The key's fingerprint: short enough to compare by eye.
    pub fn key_id(&self) -> String {
        hex(&hash("nmem-sync key id v1", &[&self.0])[..8])
    }

    /// An event's id on the server: a keyed hash of its local id.
    pub fn server_event_id(&self, local_id: &str) -> String {
        hex(&hash("nmem-sync event id v1", &[&self.0, local_id.as_bytes()])[..16])
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new((&self.0).into())
    }

    /// The key-check record stored with the space.
    pub fn key_check(&self) -> Result<Vec<u8>, CryptoError> {
        let aad = check_aad(&self.space_id(), &self.key_id());
        seal_with(&self.cipher(), &aad, CANARY)
    }

    /// Whether `record` is this key's key-check record.
    pub fn verify_check(&self, record: &[u8]) -> bool {
        let aad = check_aad(&self.space_id(), &self.key_id());
        open_with(&self.cipher(), &aad, record).is_ok_and(|p| p == CANARY)
    }

    /// Seal one event's envelope for its place on the server.
    pub fn seal(&self, place: &Place<'_>, plaintext: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let aad = place.aad();
        let mut ck = [0u8; KEY_LEN];
        random(&mut ck)?;
        let wrapped = seal_with(&self.cipher(), &aad, &ck)?;
        let body = seal_with(&XChaCha20Poly1305::new((&ck).into()), &aad, plaintext)?;
        let mut out = Vec::with_capacity(1 + wrapped.len() + body.len());
        out.push(VERSION);
        out.extend_from_slice(&wrapped);
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// Open what [`SpaceKey::seal`] sealed for the same place.
    pub fn open(&self, place: &Place<'_>, sealed: &[u8]) -> Result<Vec<u8>, CryptoError> {
        let wrapped_len = NONCE_LEN + KEY_LEN + TAG_LEN;
        if sealed.len() < 1 + wrapped_len + NONCE_LEN + TAG_LEN || sealed[0] != VERSION {
            return Err(CryptoError::Open);
        }
        let aad = place.aad();
        let ck = open_with(&self.cipher(), &aad, &sealed[1..1 + wrapped_len])?;
        let ck: [u8; KEY_LEN] = ck.try_into().map_err(|_| CryptoError::Open)?;
        open_with(
            &XChaCha20Poly1305::new((&ck).into()),
            &aad,
            &sealed[1 + wrapped_len..],
        )
    }
}

/// Where a sealed event sits on the server: all of it is bound as associated data.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub space: &'a str,
    pub device: &'a str,
    pub seq: i64,
    pub event_id: &'a str,
    pub key_id: &'a str,
}

impl Place<'_> {
    fn aad(&self) -> Vec<u8> {
        let mut a = b"nmem-sync event v1".to_vec();
        for p in [self.space, self.device, self.event_id, self.key_id] {
            a.extend_from_slice(&(p.len() as u64).to_be_bytes());
            a.extend_from_slice(p.as_bytes());
        }
        a.extend_from_slice(&self.seq.to_be_bytes());
        a
    }
}

fn check_aad(space: &str, key_id: &str) -> Vec<u8> {
    format!("nmem-sync key check v1\0{space}\0{key_id}").into_bytes()
}

/// `nonce | ciphertext+tag`, under a fresh random nonce (192 bits: random nonces are safe).
fn seal_with(c: &XChaCha20Poly1305, aad: &[u8], msg: &[u8]) -> Result<Vec<u8>, CryptoError> {
    let mut nonce = [0u8; NONCE_LEN];
    random(&mut nonce)?;
    let ct = c
        .encrypt(&XNonce::from(nonce), Payload { msg, aad })
        .map_err(|_| CryptoError::Open)?;
    let mut out = nonce.to_vec();
    out.extend_from_slice(&ct);
    Ok(out)
}

fn open_with(c: &XChaCha20Poly1305, aad: &[u8], sealed: &[u8]) -> Result<Vec<u8>, CryptoError> {
    if sealed.len() < NONCE_LEN + TAG_LEN {
        return Err(CryptoError::Open);
    }
    let (nonce, ct) = sealed.split_at(NONCE_LEN);
    let nonce: [u8; NONCE_LEN] = nonce.try_into().map_err(|_| CryptoError::Open)?;
    c.decrypt(&XNonce::from(nonce), Payload { msg: ct, aad })
        .map_err(|_| CryptoError::Open)
}

// Team spaces (docs/sync.md, "Team spaces"): a team key is a [`SpaceKey`] like the personal
// one, but instead of a phrase it is wrapped for each member's X25519 public key with `age`
// (its X25519 recipient: an ephemeral key agreement, HKDF and ChaCha20-Poly1305, authenticated).

/// This device's X25519 identity, as `age` writes it: the secret (`AGE-SECRET-KEY-1…`) and the
/// public key (`age1…`), which is what a teammate adds.
#[derive(Clone)]
pub struct DeviceIdentity {
    pub secret: String,
    pub public_key: String,
}

impl DeviceIdentity {
    pub fn generate() -> DeviceIdentity {
        use age::secrecy::ExposeSecret;
        let id = age::x25519::Identity::generate();
        DeviceIdentity {
            secret: id.to_string().expose_secret().to_string(),
            public_key: id.to_public().to_string(),
        }
    }

    fn identity(&self) -> Result<age::x25519::Identity, CryptoError> {
        self.secret
            .parse()
            .map_err(|e: &str| CryptoError::BadIdentity(e.to_string()))
    }

    /// A team key wrapped for this device (by [`wrap_for`]).
    pub fn unwrap(&self, wrapped: &[u8]) -> Result<SpaceKey, CryptoError> {
        let plain = age::decrypt(&self.identity()?, wrapped).map_err(|_| CryptoError::Open)?;
        SpaceKey::from_slice(&plain)
    }

    /// A stable secret of this device's own, for the server ids of its team events: stable
    /// across key rotations (a re-push after a rotation must find the same id).
    pub fn event_id(&self, space: &str, local_id: &str) -> String {
        hex(&hash(
            "nmem-sync team event id v1",
            &[
                self.secret.as_bytes(),
                space.as_bytes(),
                local_id.as_bytes(),
            ],
        )[..16])
    }
}

/// A member's public key (`age1…`, as `nmem sync identity` prints it), checked.
pub fn parse_public_key(text: &str) -> Result<age::x25519::Recipient, CryptoError> {
    text.trim()
        .parse::<age::x25519::Recipient>()
        .map_err(|e| CryptoError::BadPublicKey(text.trim().chars().take(80).collect(), e.into()))
}

/// Wrap a team key for one member's public key.
pub fn wrap_for(member: &age::x25519::Recipient, key: &SpaceKey) -> Result<Vec<u8>, CryptoError> {
    age::encrypt(member, &key.0).map_err(|_| CryptoError::Random)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn place<'a>(seq: i64) -> Place<'a> {
        Place {
            space: "s",
            device: "d",
            seq,
            event_id: "e",
            key_id: "k",
        }
    }

    #[test]
    fn the_phrase_gives_the_key_back() {
        let k = SpaceKey::generate().unwrap();
        let phrase = k.phrase();
        assert_eq!(phrase.split(' ').count(), 24);
        assert_eq!(SpaceKey::from_phrase(&phrase).unwrap(), k);
        // Spacing and case do not matter.
        let messy = format!("  {}\n", phrase.to_uppercase().replace(' ', "   "));
        assert_eq!(SpaceKey::from_phrase(&messy).unwrap(), k);
        assert!(k.verify_check(&k.key_check().unwrap()));
        let other = SpaceKey::generate().unwrap();
        assert!(!other.verify_check(&k.key_check().unwrap()));
        assert_ne!(k.space_id(), other.space_id());
    }

    #[test]
    fn a_bad_phrase_is_refused_with_a_reason() {
        assert!(matches!(
            SpaceKey::from_phrase("not a phrase"),
            Err(CryptoError::BadPhrase(_))
        ));
        // Valid BIP-39, but 12 words: 16 bytes of key.
        let short = bip39::Mnemonic::from_entropy(&[7u8; 16])
            .unwrap()
            .to_string();
        assert_eq!(
            SpaceKey::from_phrase(&short),
            Err(CryptoError::WrongLength(16))
        );
    }

    #[test]
    fn a_sealed_event_opens_only_in_its_place_and_under_its_key() {
        let k = SpaceKey::generate().unwrap();
        let sealed = k.seal(&place(7), b"hello").unwrap();
        assert_eq!(k.open(&place(7), &sealed).unwrap(), b"hello");
        assert_eq!(k.open(&place(8), &sealed), Err(CryptoError::Open));
        let moved = Place {
            device: "other",
            ..place(7)
        };
        assert_eq!(k.open(&moved, &sealed), Err(CryptoError::Open));
        let other = SpaceKey::generate().unwrap();
        assert_eq!(other.open(&place(7), &sealed), Err(CryptoError::Open));
        let mut flipped = sealed.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert_eq!(k.open(&place(7), &flipped), Err(CryptoError::Open));
    }

    #[test]
    fn a_team_key_opens_only_for_its_member() {
        let alice = DeviceIdentity::generate();
        let bob = DeviceIdentity::generate();
        assert!(alice.public_key.starts_with("age1"));
        let key = SpaceKey::generate().unwrap();
        let wrapped = wrap_for(&parse_public_key(&alice.public_key).unwrap(), &key).unwrap();
        assert_eq!(alice.unwrap(&wrapped).unwrap(), key);
        assert_eq!(bob.unwrap(&wrapped), Err(CryptoError::Open));
        // Stable per device and space, distinct across devices.
        assert_eq!(alice.event_id("t", "e1"), alice.event_id("t", "e1"));
        assert_ne!(alice.event_id("t", "e1"), bob.event_id("t", "e1"));
    }

    #[test]
    fn a_malformed_public_key_is_refused_with_what_to_give() {
        for bad in [
            "",
            "age1",
            "AGE-SECRET-KEY-1QQQQ",
            "ssh-ed25519 AAAA",
            "age1qqqqqqqqqqqqqqqq",
        ] {
            let e = parse_public_key(bad).unwrap_err().to_string();
            assert!(e.contains("nmem sync identity"), "{bad}: {e}");
        }
    }

    proptest! {
        /// Hostile bytes from the server never panic the opener.
        #[test]
        fn garbage_never_opens(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let k = SpaceKey([3u8; 32]);
            prop_assert!(k.open(&place(1), &bytes).is_err());
        }

        /// Anything given as a member's key is refused with a reason or accepted, never a panic.
        #[test]
        fn any_text_as_a_public_key_is_handled(text in ".{0,120}") {
            let _ = parse_public_key(&text);
        }

        #[test]
        fn any_text_round_trips(text in ".{0,300}") {
            let k = SpaceKey([9u8; 32]);
            let sealed = k.seal(&place(2), text.as_bytes()).unwrap();
            prop_assert_eq!(k.open(&place(2), &sealed).unwrap(), text.as_bytes());
        }
    }
}
