//! TLS for `httpGet` probes with `scheme: HTTPS`, as the kubelet's prober does it (upstream's
//! daemon uses that prober): the connection is encrypted but the serving certificate is not
//! verified — a Pod's certificate names a Service, not the Pod IP the probe dials, and is often
//! self-signed. Handshake signatures are still checked, so the peer holds the key it presents.

use std::sync::{Arc, LazyLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// Accepts any serving certificate (Go's `InsecureSkipVerify`, which the kubelet's prober sets).
#[derive(Debug)]
struct AnyServerCert(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// One client configuration for every probe (built on first use; its provider is explicit, so
/// no process-wide default provider is needed).
static CONFIG: LazyLock<Result<Arc<ClientConfig>, String>> = LazyLock::new(|| {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServerCert(provider)))
        .with_no_client_auth();
    Ok(Arc::new(config))
});

/// Opens TLS over `tcp` to `host` (an IP sends no SNI, a name does, as Go's client).
pub async fn connect(host: &str, tcp: TcpStream) -> Result<TlsStream<TcpStream>, String> {
    let config = CONFIG.as_ref().map_err(|e| format!("TLS set-up: {e}"))?;
    let name = ServerName::try_from(host.to_owned()).map_err(|e| format!("host {host:?}: {e}"))?;
    TlsConnector::from(config.clone())
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake: {e}"))
}
