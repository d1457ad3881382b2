//! Password-protected private keys as RocketMQ's TLS guide makes them
//! (`openssl pkcs8 -topk8 -v1 PBE-SHA1-RC4-128`, read with `tls.*.keyPassword`): PKCS#8
//! `EncryptedPrivateKeyInfo` under PKCS#12's password-based encryption with SHA-1 and RC4
//! (RFC 7292 appendices B and C). Other schemes are named in the error with the command that
//! converts the key (rustls reads unencrypted keys only).
//!
//! ```text
//! EncryptedPrivateKeyInfo ::= SEQUENCE {
//!     encryptionAlgorithm SEQUENCE { OID, SEQUENCE { salt OCTET STRING, iterations INTEGER } },
//!     encryptedData OCTET STRING }
//! ```

use sha1::{Digest, Sha1};

/// `pbeWithSHAAnd128BitRC4` (1.2.840.113549.1.12.1.1), DER content octets.
const PBE_SHA1_RC4_128: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x0C, 0x01, 0x01];
/// `pbeWithSHAAnd40BitRC4` (1.2.840.113549.1.12.1.2).
const PBE_SHA1_RC4_40: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x0C, 0x01, 0x02];
/// The other PKCS#12 schemes (3DES, 2DES, RC2): 1.2.840.113549.1.12.1.{3..6}.
const PKCS12_PBE_PREFIX: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x0C, 0x01];
/// PBES2 (1.2.840.113549.1.5.13): OpenSSL 3's default for `pkcs8 -topk8`.
const PBES2: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x05, 0x0D];
/// Most iterations accepted (OpenSSL writes 2,048; a crafted file must not stall the start).
const MAX_ITERATIONS: u64 = 10_000_000;

/// Why a key could not be decrypted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PbeError {
    /// Not an `EncryptedPrivateKeyInfo`.
    Malformed(&'static str),
    /// An encryption scheme other than PBE-SHA1-RC4.
    Unsupported(&'static str),
    /// The result is not a private key: the password is wrong.
    WrongPassword,
}

impl std::fmt::Display for PbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PbeError::Malformed(what) => write!(f, "not a PKCS#8 encrypted key ({what})"),
            PbeError::Unsupported(scheme) => write!(
                f,
                "it is encrypted with {scheme}; FerroMQ reads PBE-SHA1-RC4-128 and -40 keys (RocketMQ's TLS guide: \
                 `openssl pkcs8 -topk8 -v1 PBE-SHA1-RC4-128 -provider legacy -provider default`) or unencrypted \
                 ones (`openssl pkey -in KEY -out plain.key`)"
            ),
            PbeError::WrongPassword => f.write_str("the key password does not decrypt it"),
        }
    }
}

/// The PKCS#8 `PrivateKeyInfo` (DER) inside the `ENCRYPTED PRIVATE KEY` PEM block of `pem`.
///
/// # Errors
/// [`PbeError`]: no such block, an unsupported scheme, a wrong password.
pub fn decrypt_pem(pem: &str, password: &str) -> Result<Vec<u8>, PbeError> {
    const BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
    let start = pem.find(BEGIN).ok_or(PbeError::Malformed("no ENCRYPTED PRIVATE KEY block"))? + BEGIN.len();
    let end = pem[start..].find(END).ok_or(PbeError::Malformed("the PEM block does not end"))? + start;
    let b64: String = pem[start..end].chars().filter(|c| !c.is_whitespace()).collect();
    let der = ferromq_protocol::body::base64_decode(&b64).ok_or(PbeError::Malformed("bad base64"))?;
    decrypt_der(&der, password)
}

/// As [`decrypt_pem`], from the DER `EncryptedPrivateKeyInfo`.
///
/// # Errors
/// As [`decrypt_pem`].
pub fn decrypt_der(der: &[u8], password: &str) -> Result<Vec<u8>, PbeError> {
    let mut outer = Der::new(der).sequence()?;
    let mut algorithm = outer.sequence()?;
    let oid = algorithm.element(0x06)?;
    let key_len = if oid == PBE_SHA1_RC4_128 {
        16
    } else if oid == PBE_SHA1_RC4_40 {
        5
    } else if oid == PBES2 {
        return Err(PbeError::Unsupported("PBES2 (OpenSSL 3's default)"));
    } else if oid.starts_with(PKCS12_PBE_PREFIX) {
        return Err(PbeError::Unsupported("a PKCS#12 DES or RC2 scheme"));
    } else {
        return Err(PbeError::Unsupported("an unknown scheme"));
    };
    let mut params = algorithm.sequence()?;
    let salt = params.element(0x04)?;
    let iterations = params.element(0x02)?;
    if iterations.is_empty() || iterations.len() > 4 || iterations[0] & 0x80 != 0 {
        return Err(PbeError::Malformed("iteration count"));
    }
    let iterations = iterations.iter().fold(0u64, |n, b| n << 8 | u64::from(*b));
    if iterations == 0 || iterations > MAX_ITERATIONS {
        return Err(PbeError::Malformed("iteration count out of range"));
    }
    let data = outer.element(0x04)?;
    let key = pkcs12_key(password, salt, iterations, key_len);
    let plain = rc4(&key, data);
    // A PrivateKeyInfo is a SEQUENCE that fills the whole text and starts with version 0 or 1.
    let mut info = Der::new(&plain);
    let ok = info.sequence().ok().and_then(|mut s| s.element(0x02).ok().map(|v| v == [0] || v == [1]));
    if ok != Some(true) || !info.is_empty() {
        return Err(PbeError::WrongPassword);
    }
    Ok(plain)
}

/// RFC 7292 appendix B.2 with SHA-1 (u = 20, v = 64), ID 1 (key material): `n` bytes.
fn pkcs12_key(password: &str, salt: &[u8], iterations: u64, n: usize) -> Vec<u8> {
    const V: usize = 64;
    // BMPString, big-endian, with a two-byte terminator.
    let mut pass: Vec<u8> = password.encode_utf16().flat_map(u16::to_be_bytes).collect();
    pass.extend_from_slice(&[0, 0]);
    let fill = |src: &[u8]| -> Vec<u8> {
        if src.is_empty() {
            return Vec::new();
        }
        let len = src.len().div_ceil(V) * V;
        src.iter().copied().cycle().take(len).collect()
    };
    let mut i_block = fill(salt);
    i_block.extend(fill(&pass));
    let d = [1u8; V];
    let mut out = Vec::with_capacity(n + 20);
    while out.len() < n {
        let mut a = Sha1::new().chain_update(d).chain_update(&i_block).finalize();
        for _ in 1..iterations {
            a = Sha1::digest(a);
        }
        out.extend_from_slice(&a);
        if out.len() >= n {
            break;
        }
        let b: Vec<u8> = a.iter().copied().cycle().take(V).collect();
        for chunk in i_block.chunks_mut(V) {
            // chunk = (chunk + b + 1) mod 2^(8v)
            let mut carry = 1u16;
            for (x, y) in chunk.iter_mut().rev().zip(b.iter().rev()) {
                let sum = u16::from(*x) + u16::from(*y) + carry;
                *x = sum as u8;
                carry = sum >> 8;
            }
        }
    }
    out.truncate(n);
    out
}

/// RC4 (ARCFOUR): encryption and decryption are the same.
fn rc4(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut s: [u8; 256] = std::array::from_fn(|i| i as u8);
    let mut j = 0u8;
    for i in 0..256 {
        j = j.wrapping_add(s[i]).wrapping_add(key[i % key.len()]);
        s.swap(i, usize::from(j));
    }
    let (mut i, mut j) = (0u8, 0u8);
    data.iter()
        .map(|byte| {
            i = i.wrapping_add(1);
            j = j.wrapping_add(s[usize::from(i)]);
            s.swap(usize::from(i), usize::from(j));
            byte ^ s[usize::from(s[usize::from(i)].wrapping_add(s[usize::from(j)]))]
        })
        .collect()
}

/// A reader of DER elements (definite lengths only, as DER requires).
struct Der<'a> {
    rest: &'a [u8],
}

impl<'a> Der<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Der { rest: bytes }
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The content of the next element, which must have `tag`.
    fn element(&mut self, tag: u8) -> Result<&'a [u8], PbeError> {
        let bad = PbeError::Malformed("bad DER");
        let (&t, rest) = self.rest.split_first().ok_or(bad.clone())?;
        if t != tag {
            return Err(PbeError::Malformed("unexpected DER element"));
        }
        let (&first, mut rest) = rest.split_first().ok_or(bad.clone())?;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let n = usize::from(first & 0x7F);
            if n == 0 || n > 4 || rest.len() < n {
                return Err(bad);
            }
            let len = rest[..n].iter().fold(0usize, |l, b| l << 8 | usize::from(*b));
            rest = &rest[n..];
            len
        };
        if rest.len() < len {
            return Err(bad);
        }
        let (content, after) = rest.split_at(len);
        self.rest = after;
        Ok(content)
    }

    fn sequence(&mut self) -> Result<Der<'a>, PbeError> {
        self.element(0x30).map(Der::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rc4_matches_rfc_6229() {
        // RFC 6229, key 0x0102030405 (40 bits), keystream bytes 0-15.
        let stream = rc4(&[1, 2, 3, 4, 5], &[0; 16]);
        assert_eq!(
            stream,
            [0xb2, 0x39, 0x63, 0x05, 0xf0, 0x3d, 0xc0, 0x27, 0xcc, 0xc3, 0x52, 0x4a, 0x0a, 0x11, 0x18, 0xa8]
        );
    }

    #[test]
    fn truncated_or_foreign_input_is_refused_not_panicked_on() {
        for bad in
            [&[][..], &[0x30], &[0x30, 0x84, 0xff, 0xff, 0xff, 0xff], &[0x04, 0x01, 0x00], &[0x30, 0x02, 0x30, 0x00]]
        {
            assert!(matches!(decrypt_der(bad, "pw"), Err(PbeError::Malformed(_))), "{bad:?}");
        }
    }
}
