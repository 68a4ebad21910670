//! Webhook certificates: a self-signed CA and a serving certificate, kept in a Secret so every
//! replica and every restart serves the same CA (the one patched into the API server's
//! configurations), renewed before expiry.
//!
//! The pure part (generate, check, decide) is separate from the Secret I/O so it can be tested
//! without a cluster.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, PostParams};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use crate::Error;

/// Secret data keys, as upstream's secret cert writer names them (both spellings of the
/// serving pair are written, as upstream does).
pub const CA_KEY: &str = "ca-key.pem";
/// CA certificate.
pub const CA_CERT: &str = "ca-cert.pem";
/// Serving key.
pub const SERVER_KEY: &str = "key.pem";
/// Serving key, kubernetes.io/tls spelling.
pub const SERVER_KEY_TLS: &str = "tls.key";
/// Serving certificate.
pub const SERVER_CERT: &str = "cert.pem";
/// Serving certificate, kubernetes.io/tls spelling.
pub const SERVER_CERT_TLS: &str = "tls.crt";

/// Common name of the CA (upstream's), also used to rebuild the issuer from the stored key.
const CA_COMMON_NAME: &str = "webhook-cert-ca";

/// PEM-encoded CA and serving pair.
#[derive(Clone, PartialEq, Eq)]
pub struct CertBundle {
    /// CA certificate (this is the caBundle).
    pub ca_cert: String,
    /// CA private key.
    pub ca_key: String,
    /// Serving certificate.
    pub cert: String,
    /// Serving private key.
    pub key: String,
}

impl std::fmt::Debug for CertBundle {
    // Keys never go to logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertBundle").finish_non_exhaustive()
    }
}

/// Lifetimes of generated certificates.
#[derive(Debug, Clone, Copy)]
pub struct CertPolicy {
    /// CA lifetime.
    pub ca_validity: Duration,
    /// Serving certificate lifetime (capped by the CA's).
    pub cert_validity: Duration,
    /// Renew when less than this remains.
    pub renew_before: Duration,
}

impl Default for CertPolicy {
    fn default() -> Self {
        const DAY: u64 = 24 * 3600;
        Self {
            ca_validity: Duration::from_secs(10 * 365 * DAY),
            cert_validity: Duration::from_secs(365 * DAY),
            renew_before: Duration::from_secs(30 * DAY),
        }
    }
}

/// What to do with the certificates found in the Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// They are fine.
    Keep,
    /// Write this bundle (new serving cert from the same CA, or everything new).
    Replace(CertBundle),
}

fn ca_params(now: SystemTime, policy: &CertPolicy) -> CertificateParams {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, CA_COMMON_NAME);
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    // Backdate a little so a skewed API server clock still accepts a fresh certificate.
    p.not_before = (now - Duration::from_secs(3600)).into();
    p.not_after = (now + policy.ca_validity).into();
    p
}

/// A new CA: (certificate PEM, key PEM).
pub fn generate_ca(now: SystemTime, policy: &CertPolicy) -> Result<(String, String), Error> {
    let key = KeyPair::generate()?;
    let cert = ca_params(now, policy).self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A serving certificate for `names` (DNS names or IPs) signed by the CA key: (cert, key).
pub fn issue_serving_cert(
    ca_key_pem: &str,
    ca_not_after: SystemTime,
    names: &[String],
    now: SystemTime,
    policy: &CertPolicy,
) -> Result<(String, String), Error> {
    let ca_key = KeyPair::from_pem(ca_key_pem)?;
    // The issuer is rebuilt from our fixed CA parameters; only its name and key matter.
    let issuer = Issuer::new(ca_params(now, policy), ca_key);
    let mut p = CertificateParams::new(names.to_vec())?;
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        names
            .first()
            .map(String::as_str)
            .unwrap_or("kruise-webhook"),
    );
    p.distinguished_name = dn;
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    p.use_authority_key_identifier_extension = true;
    p.not_before = (now - Duration::from_secs(3600)).into();
    p.not_after = (now + policy.cert_validity).min(ca_not_after).into();
    let key = KeyPair::generate()?;
    let cert = p.signed_by(&key, &issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A complete new bundle.
pub fn generate_bundle(
    names: &[String],
    now: SystemTime,
    policy: &CertPolicy,
) -> Result<CertBundle, Error> {
    let (ca_cert, ca_key) = generate_ca(now, policy)?;
    let (cert, key) = issue_serving_cert(&ca_key, now + policy.ca_validity, names, now, policy)?;
    Ok(CertBundle {
        ca_cert,
        ca_key,
        cert,
        key,
    })
}

/// Decides whether `existing` can keep serving `names` until `now + renew_before`.
pub fn decide(
    existing: Option<&CertBundle>,
    names: &[String],
    now: SystemTime,
    policy: &CertPolicy,
) -> Result<Decision, Error> {
    let Some(b) = existing else {
        return Ok(Decision::Replace(generate_bundle(names, now, policy)?));
    };
    let horizon = now + policy.renew_before;
    let ca_not_after = not_after(&b.ca_cert);
    let ca_usable =
        ca_not_after.is_some_and(|t| t > horizon) && KeyPair::from_pem(&b.ca_key).is_ok();
    if !ca_usable {
        tracing::info!("webhook CA missing, unreadable or expiring; generating a new CA");
        return Ok(Decision::Replace(generate_bundle(names, now, policy)?));
    }
    if serves(b, names, horizon) {
        return Ok(Decision::Keep);
    }
    tracing::info!("webhook serving certificate invalid or expiring; issuing a new one");
    let ca_not_after = ca_not_after.unwrap_or(now);
    let (cert, key) = issue_serving_cert(&b.ca_key, ca_not_after, names, now, policy)?;
    let renewed = CertBundle {
        cert,
        key,
        ..b.clone()
    };
    // A CA we cannot sign for (e.g. written by another tool with a different subject) must go.
    if serves(&renewed, names, now) {
        Ok(Decision::Replace(renewed))
    } else {
        tracing::info!("stored CA cannot sign verifiable certificates; generating a new CA");
        Ok(Decision::Replace(generate_bundle(names, now, policy)?))
    }
}

/// Whether the serving certificate chains to the CA, matches every name, is still valid at
/// `at`, and the key parses.
pub fn serves(b: &CertBundle, names: &[String], at: SystemTime) -> bool {
    let Ok(ca) = CertificateDer::from_pem_slice(b.ca_cert.as_bytes()) else {
        return false;
    };
    let Ok(leaf) = CertificateDer::from_pem_slice(b.cert.as_bytes()) else {
        return false;
    };
    if rustls::pki_types::PrivateKeyDer::from_pem_slice(b.key.as_bytes()).is_err() {
        return false;
    }
    let mut roots = rustls::RootCertStore::empty();
    if roots.add(ca).is_err() {
        return false;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let Ok(verifier) =
        rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
    else {
        return false;
    };
    let Ok(since_epoch) = at.duration_since(UNIX_EPOCH) else {
        return false;
    };
    let at = UnixTime::since_unix_epoch(since_epoch);
    names.iter().all(|n| {
        let Ok(sn) = ServerName::try_from(n.clone()) else {
            return false;
        };
        verifier
            .verify_server_cert(&leaf, &[], &sn, &[], at)
            .is_ok()
    })
}

/// The names a serving certificate needs: the Service's DNS names plus any dev-mode host.
pub fn serving_names(service: &str, namespace: &str, extra_host: Option<&str>) -> Vec<String> {
    let mut names = vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ];
    if let Some(h) = extra_host.filter(|h| !h.is_empty()) {
        let h = h.trim_start_matches('[').trim_end_matches(']').to_owned();
        if !names.contains(&h) {
            names.push(h);
        }
    }
    names
}

/// Whether a name is an IP address (IP SAN) rather than a DNS name.
pub fn is_ip(name: &str) -> bool {
    name.parse::<IpAddr>().is_ok()
}

/// `notAfter` of the first certificate in a PEM string.
pub fn not_after(cert_pem: &str) -> Option<SystemTime> {
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes()).ok()?;
    der_not_after(der.as_ref())
}

/// Reads `tbsCertificate.validity.notAfter` with a minimal DER walk (rcgen can only parse
/// certificates with its x509-parser feature, which we do not otherwise need).
fn der_not_after(der: &[u8]) -> Option<SystemTime> {
    let (_, cert, _) = der_read(der)?; // Certificate SEQUENCE
    let (_, tbs, _) = der_read(cert)?; // tbsCertificate SEQUENCE
    let mut rest = tbs;
    let (tag, _, r) = der_read(rest)?;
    // Optional explicit [0] version.
    if tag == 0xa0 {
        rest = r;
    }
    for _ in 0..3 {
        // serialNumber, signature, issuer
        let (_, _, r) = der_read(rest)?;
        rest = r;
    }
    let (_, validity, _) = der_read(rest)?;
    let (_, _, after_not_before) = der_read(validity)?;
    let (tag, t, _) = der_read(after_not_before)?;
    parse_asn1_time(tag, t)
}

/// One TLV: (tag, contents, remainder).
fn der_read(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *b.first()?;
    let first = *b.get(1)?;
    let (len, header) = if first < 0x80 {
        (usize::from(first), 2)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for i in 0..n {
            len = (len << 8) | usize::from(*b.get(2 + i)?);
        }
        (len, 2 + n)
    };
    let end = header.checked_add(len)?;
    Some((tag, b.get(header..end)?, b.get(end..)?))
}

fn parse_asn1_time(tag: u8, t: &[u8]) -> Option<SystemTime> {
    let s = std::str::from_utf8(t).ok()?.strip_suffix('Z')?;
    let (year, rest) = match tag {
        // UTCTime: YYMMDDHHMMSS
        0x17 => {
            let yy: i64 = s.get(0..2)?.parse().ok()?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, s.get(2..)?)
        }
        // GeneralizedTime: YYYYMMDDHHMMSS
        0x18 => (s.get(0..4)?.parse().ok()?, s.get(4..)?),
        _ => return None,
    };
    let num = |r: std::ops::Range<usize>| -> Option<i64> { rest.get(r)?.parse().ok() };
    let (mo, d, h, mi, se) = (num(0..2)?, num(2..4)?, num(4..6)?, num(6..8)?, num(8..10)?);
    let days = days_from_civil(year, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + se;
    let secs = u64::try_from(secs).ok()?;
    UNIX_EPOCH.checked_add(Duration::from_secs(secs))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Reads a bundle from Secret data; `None` when any part is missing or not UTF-8.
pub fn bundle_from_secret(secret: &Secret) -> Option<CertBundle> {
    let data = secret.data.as_ref()?;
    let get = |k: &str| -> Option<String> {
        String::from_utf8(data.get(k)?.0.clone())
            .ok()
            .filter(|s| !s.is_empty())
    };
    Some(CertBundle {
        ca_cert: get(CA_CERT)?,
        ca_key: get(CA_KEY)?,
        cert: get(SERVER_CERT_TLS).or_else(|| get(SERVER_CERT))?,
        key: get(SERVER_KEY_TLS).or_else(|| get(SERVER_KEY))?,
    })
}

/// Secret data for a bundle, with upstream's key names.
pub fn secret_data(b: &CertBundle) -> BTreeMap<String, ByteString> {
    let entry = |k: &str, v: &str| (k.to_owned(), ByteString(v.as_bytes().to_vec()));
    BTreeMap::from([
        entry(CA_CERT, &b.ca_cert),
        entry(CA_KEY, &b.ca_key),
        entry(SERVER_CERT, &b.cert),
        entry(SERVER_CERT_TLS, &b.cert),
        entry(SERVER_KEY, &b.key),
        entry(SERVER_KEY_TLS, &b.key),
    ])
}

/// Secret data keys of certificates provisioned by someone else (`EnableExternalCerts`), as
/// upstream's external cert writer reads them: the `kubernetes.io/tls` pair and the CA,
/// which is what cert-manager writes into a Certificate's Secret.
pub const EXTERNAL_CA_CERT: &str = "ca.crt";
/// The CA key of an external Secret, read if present (nothing signs with it).
pub const EXTERNAL_CA_KEY: &str = "ca.key";

/// What is wrong with an externally provisioned Secret: its namespace/name and what is
/// missing. The message names the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExternalCertError {
    /// The Secret does not exist.
    #[error(
        "EnableExternalCerts is on but Secret {namespace}/{name} does not exist: provision it \
         (e.g. a cert-manager Certificate with secretName {name} for the DNS names {names}), \
         point SECRET_NAME at the Secret holding the certificates, or turn EnableExternalCerts off"
    )]
    NoSecret {
        namespace: String,
        name: String,
        names: String,
    },
    /// The Secret lacks one of the keys, or it is empty or not UTF-8.
    #[error(
        "EnableExternalCerts is on but Secret {namespace}/{name} has no usable `{key}`: it must \
         hold PEM in `ca.crt` (the CA the API server is given), `tls.crt` and `tls.key` (the \
         serving pair), as cert-manager writes them"
    )]
    MissingKey {
        namespace: String,
        name: String,
        key: &'static str,
    },
}

/// The bundle served under `EnableExternalCerts` (upstream `externalSecretToCerts`): read from
/// the Secret someone else keeps, never written. `ca_key` is what the Secret holds under
/// `ca.key` if anything (nothing here signs with it). A serving pair that does not chain to
/// `ca.crt` for `names` is served anyway, with a warning: the API server will refuse it.
pub fn external_bundle(
    secret: Option<&Secret>,
    namespace: &str,
    name: &str,
    names: &[String],
) -> Result<CertBundle, ExternalCertError> {
    let Some(secret) = secret else {
        return Err(ExternalCertError::NoSecret {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            names: names.join(", "),
        });
    };
    let get = |key: &'static str| -> Result<String, ExternalCertError> {
        secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| ExternalCertError::MissingKey {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                key,
            })
    };
    let bundle = CertBundle {
        ca_cert: get(EXTERNAL_CA_CERT)?,
        cert: get(SERVER_CERT_TLS)?,
        key: get(SERVER_KEY_TLS)?,
        ca_key: get(EXTERNAL_CA_KEY).unwrap_or_default(),
    };
    if !serves(&bundle, names, SystemTime::now()) {
        tracing::warn!(
            secret = %format!("{namespace}/{name}"),
            names = ?names,
            "the external serving certificate does not chain to ca.crt for these names, or has expired"
        );
    }
    Ok(bundle)
}

/// Reads the externally provisioned bundle from the cluster ([`external_bundle`]).
pub async fn read_external(
    api: &Api<Secret>,
    namespace: &str,
    name: &str,
    names: &[String],
) -> Result<CertBundle, Error> {
    let secret = api.get_opt(name).await?;
    Ok(external_bundle(secret.as_ref(), namespace, name, names)?)
}

/// Makes sure the Secret holds a usable bundle and returns it. Safe to run from several
/// replicas at once: creation loses gracefully to a concurrent creator (409 → read theirs),
/// and updates carry the resourceVersion read (409 → start over).
pub async fn ensure_secret(
    api: &Api<Secret>,
    name: &str,
    names: &[String],
    policy: &CertPolicy,
) -> Result<CertBundle, Error> {
    for attempt in 0..5 {
        let existing = api.get_opt(name).await?;
        let current = existing.as_ref().and_then(bundle_from_secret);
        let decision = decide(current.as_ref(), names, SystemTime::now(), policy)?;
        let bundle = match decision {
            Decision::Keep => {
                if let Some(b) = current {
                    return Ok(b);
                }
                continue;
            }
            Decision::Replace(b) => b,
        };
        let result = match existing {
            None => {
                let secret = Secret {
                    metadata: ObjectMeta {
                        name: Some(name.to_owned()),
                        ..Default::default()
                    },
                    data: Some(secret_data(&bundle)),
                    ..Default::default()
                };
                api.create(&PostParams::default(), &secret)
                    .await
                    .map(|_| ())
            }
            Some(mut secret) => {
                // Keep the resourceVersion we read so a concurrent writer makes this fail.
                let mut data = secret.data.take().unwrap_or_default();
                data.extend(secret_data(&bundle));
                secret.data = Some(data);
                api.replace(name, &PostParams::default(), &secret)
                    .await
                    .map(|_| ())
            }
        };
        match result {
            Ok(()) => {
                tracing::info!(secret = name, "wrote webhook certificates");
                return Ok(bundle);
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                tracing::debug!(
                    secret = name,
                    attempt,
                    "lost a race writing webhook certificates; re-reading"
                );
                continue;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Certificate(format!(
        "could not settle webhook certificates in Secret {name} after repeated conflicts"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        serving_names("kruise-webhook-service", "kruise-system", Some("127.0.0.1"))
    }

    #[test]
    fn generated_bundle_serves_all_names() {
        let now = SystemTime::now();
        let p = CertPolicy::default();
        let b = generate_bundle(&names(), now, &p).expect("bundle");
        assert!(serves(&b, &names(), now));
        assert!(!serves(&b, &["other.example".to_owned()], now));
        assert_eq!(
            decide(Some(&b), &names(), now, &p).expect("decide"),
            Decision::Keep
        );
    }

    #[test]
    fn not_after_is_read_from_der() {
        let now = SystemTime::now();
        let p = CertPolicy::default();
        let (ca, _) = generate_ca(now, &p).expect("ca");
        let na = not_after(&ca).expect("not after");
        let expected = now + p.ca_validity;
        let diff = expected.duration_since(na).unwrap_or_else(|e| e.duration());
        assert!(diff < Duration::from_secs(5), "{diff:?}");
    }

    #[test]
    fn expiring_leaf_is_reissued_from_the_same_ca() {
        let now = SystemTime::now();
        let p = CertPolicy::default();
        let b = generate_bundle(&names(), now, &p).expect("bundle");
        let later = now + p.cert_validity - Duration::from_secs(24 * 3600);
        match decide(Some(&b), &names(), later, &p).expect("decide") {
            Decision::Replace(nb) => {
                assert_eq!(nb.ca_cert, b.ca_cert, "CA is kept so caBundle stays valid");
                assert_ne!(nb.cert, b.cert);
                assert!(serves(&nb, &names(), later + Duration::from_secs(3600)));
            }
            Decision::Keep => panic!("should renew"),
        }
    }

    #[test]
    fn expiring_ca_is_replaced() {
        let now = SystemTime::now();
        let p = CertPolicy::default();
        let b = generate_bundle(&names(), now, &p).expect("bundle");
        let later = now + p.ca_validity - Duration::from_secs(24 * 3600);
        match decide(Some(&b), &names(), later, &p).expect("decide") {
            Decision::Replace(nb) => assert_ne!(nb.ca_cert, b.ca_cert),
            Decision::Keep => panic!("should renew"),
        }
    }

    #[test]
    fn new_name_triggers_reissue() {
        let now = SystemTime::now();
        let p = CertPolicy::default();
        let b = generate_bundle(&names()[..2], now, &p).expect("bundle");
        assert!(matches!(
            decide(Some(&b), &names(), now, &p).expect("decide"),
            Decision::Replace(_)
        ));
    }

    #[test]
    fn garbage_bundle_is_replaced() {
        let now = SystemTime::now();
        let p = CertPolicy::default();
        let junk = CertBundle {
            ca_cert: "x".into(),
            ca_key: "y".into(),
            cert: "z".into(),
            key: "w".into(),
        };
        assert!(matches!(
            decide(Some(&junk), &names(), now, &p).expect("decide"),
            Decision::Replace(_)
        ));
    }

    #[test]
    fn secret_round_trip_uses_upstream_keys() {
        let b = generate_bundle(&names(), SystemTime::now(), &CertPolicy::default()).expect("b");
        let s = Secret {
            data: Some(secret_data(&b)),
            ..Default::default()
        };
        let keys: Vec<String> = s
            .data
            .as_ref()
            .map(|d| d.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(
            keys,
            vec![
                "ca-cert.pem",
                "ca-key.pem",
                "cert.pem",
                "key.pem",
                "tls.crt",
                "tls.key"
            ]
        );
        assert_eq!(bundle_from_secret(&s), Some(b));
    }

    #[test]
    fn civil_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    /// A Secret as cert-manager writes it for a Certificate: `ca.crt`, `tls.crt`, `tls.key`.
    fn cert_manager_secret(b: &CertBundle) -> Secret {
        let entry = |k: &str, v: &str| (k.to_owned(), ByteString(v.as_bytes().to_vec()));
        Secret {
            data: Some(BTreeMap::from([
                entry(EXTERNAL_CA_CERT, &b.ca_cert),
                entry(SERVER_CERT_TLS, &b.cert),
                entry(SERVER_KEY_TLS, &b.key),
            ])),
            ..Default::default()
        }
    }

    #[test]
    fn external_bundle_is_read_from_cert_managers_keys() {
        let b = generate_bundle(&names(), SystemTime::now(), &CertPolicy::default()).expect("b");
        let got = external_bundle(Some(&cert_manager_secret(&b)), "ns", "certs", &names())
            .expect("complete Secret");
        assert_eq!(
            got,
            CertBundle {
                ca_key: String::new(),
                ..b.clone()
            }
        );
        assert!(serves(&got, &names(), SystemTime::now()));
        // Our own Secret's spelling of the CA is not what an external issuer writes.
        let ours = Secret {
            data: Some(secret_data(&b)),
            ..Default::default()
        };
        assert_eq!(
            external_bundle(Some(&ours), "ns", "certs", &names()),
            Err(ExternalCertError::MissingKey {
                namespace: "ns".into(),
                name: "certs".into(),
                key: EXTERNAL_CA_CERT
            })
        );
    }

    #[test]
    fn external_bundle_errors_name_the_secret_the_key_and_the_fix() {
        let err = external_bundle(None, "kruise-system", "kruise-webhook-certs", &names())
            .expect_err("no Secret");
        let msg = err.to_string();
        for part in [
            "EnableExternalCerts",
            "kruise-system/kruise-webhook-certs",
            "does not exist",
            "cert-manager Certificate",
            "kruise-webhook-service.kruise-system.svc",
            "SECRET_NAME",
        ] {
            assert!(msg.contains(part), "{part:?} missing from {msg}");
        }
        let b = generate_bundle(&names(), SystemTime::now(), &CertPolicy::default()).expect("b");
        for key in [EXTERNAL_CA_CERT, SERVER_CERT_TLS, SERVER_KEY_TLS] {
            let mut secret = cert_manager_secret(&b);
            secret.data.as_mut().expect("data").remove(key);
            let err = external_bundle(Some(&secret), "ns", "certs", &names()).expect_err(key);
            assert!(
                err.to_string()
                    .contains(&format!("ns/certs has no usable `{key}`")),
                "{err}"
            );
        }
    }
}
