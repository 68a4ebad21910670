//! Generates the containerd content-service client (pull progress) from `proto/content.proto`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    tonic_prost_build::configure()
        .build_server(false)
        .compile_protos(&["proto/content.proto"], &["proto"])?;
    Ok(())
}
