//! A JWT client assertion (RFC 7523 §2.2; OAuth's `private_key_jwt`): the
//! client proves who it is with a short-lived token signed by its private
//! key instead of sending a secret. ES256 (P-256) and RS256 keys in PKCS#8
//! PEM, signed with ring.

use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{
    EcdsaKeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING, RSA_PKCS1_SHA256,
};
use serde_json::json;

use crate::error::AuthError;

/// How long an assertion is good for.
const LIFETIME_SECS: u64 = 120;

/// The assertion type of RFC 7523.
pub const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

enum Key {
    Es256(EcdsaKeyPair),
    Rs256(RsaKeyPair),
}

/// A private key that signs client assertions.
pub struct AssertionKey {
    key: Key,
    rng: SystemRandom,
}

impl std::fmt::Debug for AssertionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.key {
            Key::Es256(_) => "AssertionKey(ES256)",
            Key::Rs256(_) => "AssertionKey(RS256)",
        })
    }
}

impl AssertionKey {
    /// Reads a PKCS#8 PEM private key (`-----BEGIN PRIVATE KEY-----`): a
    /// P-256 key signs ES256, an RSA key RS256. Nothing of the key is in
    /// an error.
    pub fn from_pem(pem: &str) -> Result<AssertionKey, AuthError> {
        let body: String = pem
            .lines()
            .map(str::trim)
            .skip_while(|l| *l != "-----BEGIN PRIVATE KEY-----")
            .skip(1)
            .take_while(|l| *l != "-----END PRIVATE KEY-----")
            .collect();
        if body.is_empty() {
            return Err(AuthError::Configuration(
                "the private key is not a PKCS#8 PEM key (-----BEGIN PRIVATE KEY-----)".to_owned(),
            ));
        }
        let der = STANDARD.decode(body).map_err(|_| {
            AuthError::Configuration("the private key's PEM is not base64".to_owned())
        })?;
        let rng = SystemRandom::new();
        let key =
            if let Ok(k) = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng) {
                Key::Es256(k)
            } else if let Ok(k) = RsaKeyPair::from_pkcs8(&der) {
                Key::Rs256(k)
            } else {
                return Err(AuthError::Configuration(
                    "the private key is neither a P-256 (ES256) nor an RSA (RS256) PKCS#8 key"
                        .to_owned(),
                ));
            };
        Ok(AssertionKey { key, rng })
    }

    /// A signed assertion that `client_id` is asking `audience` (the
    /// authorization server's issuer) for a token.
    pub fn assertion(&self, client_id: &str, audience: &str) -> Result<String, AuthError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut jti = [0u8; 16];
        self.rng
            .fill(&mut jti)
            .map_err(|_| AuthError::Configuration("no randomness for the assertion".to_owned()))?;
        let alg = match self.key {
            Key::Es256(_) => "ES256",
            Key::Rs256(_) => "RS256",
        };
        let header = json!({"alg": alg, "typ": "JWT"});
        let claims = json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + LIFETIME_SECS,
            "jti": URL_SAFE_NO_PAD.encode(jti),
        });
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let failed = |_| AuthError::Configuration("signing the assertion failed".to_owned());
        let signature = match &self.key {
            Key::Es256(k) => k
                .sign(&self.rng, signing_input.as_bytes())
                .map_err(failed)?
                .as_ref()
                .to_vec(),
            Key::Rs256(k) => {
                let mut out = vec![0; k.public().modulus_len()];
                k.sign(
                    &RSA_PKCS1_SHA256,
                    &self.rng,
                    signing_input.as_bytes(),
                    &mut out,
                )
                .map_err(failed)?;
                out
            }
        };
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::signature::{KeyPair, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};

    #[test]
    fn an_es256_assertion_verifies_with_the_public_key_and_names_the_client() {
        let rng = SystemRandom::new();
        let der = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            STANDARD.encode(der.as_ref())
        );
        let key = AssertionKey::from_pem(&pem).unwrap();
        let jwt = key.assertion("client-1", "http://localhost:9").unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "client-1");
        assert_eq!(claims["sub"], "client-1");
        assert_eq!(claims["aud"], "http://localhost:9");
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der.as_ref(), &rng).unwrap();
        let public = UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, pair.public_key().as_ref());
        let signed = format!("{}.{}", parts[0], parts[1]);
        public
            .verify(
                signed.as_bytes(),
                &URL_SAFE_NO_PAD.decode(parts[2]).unwrap(),
            )
            .unwrap();
        assert!(!format!("{key:?}").contains(&STANDARD.encode(der.as_ref())[..20]));
    }

    #[test]
    fn what_is_not_a_pkcs8_key_is_refused_without_showing_it() {
        for pem in [
            "",
            "-----BEGIN PRIVATE KEY-----\n!!!\n-----END PRIVATE KEY-----",
            "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWJ5dGVz\n-----END PRIVATE KEY-----",
        ] {
            let e = AssertionKey::from_pem(pem).unwrap_err().to_string();
            assert!(!e.contains("c2VjcmV0"), "{e}");
        }
    }
}
