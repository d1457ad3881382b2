//! The protobuf codec of every generated service and client (`codec_path` in
//! `tools/protogen`): prost's, with buffers sized for RocketMQ's messages.
//!
//! tonic's default codec starts every call's encode and decode buffers at 8 KiB. A
//! SendMessage answer is about 100 bytes and a 1 KiB send request about 1.2 KiB, so each unary
//! call allocated and freed 16 KiB; with glibc's allocator those sizes miss the per-thread cache
//! and, freed together, trigger its consolidation of small chunks: about 5 % of the gRPC
//! thread under `bench grpc-produce` (docs/benchmarks.md). Smaller starting buffers grow on
//! demand (a ReceiveMessage answer with a large body reserves what it needs), so only the
//! start changes, never what fits.

use std::marker::PhantomData;

use prost::Message;
use tonic::codec::{BufferSettings, Codec};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// Start of an answer's encode buffer: a SendMessage/AckMessage answer fits.
const ENCODE_BUFFER: usize = 512;

/// Start of a request's decode buffer: a send of a 1 KiB body with its properties fits.
const DECODE_BUFFER: usize = 2048;

/// Streamed answers (ReceiveMessage) are handed to HTTP/2 once this much is encoded, as
/// tonic's default.
const YIELD_THRESHOLD: usize = 32 * 1024;

/// prost encoding with [`ENCODE_BUFFER`] / [`DECODE_BUFFER`] starting buffers.
#[derive(Debug)]
pub struct ProxyCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for ProxyCodec<T, U> {
    fn default() -> Self {
        ProxyCodec(PhantomData)
    }
}

impl<T, U> Codec for ProxyCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstCodec::<T, U>::raw_encoder(BufferSettings::new(ENCODE_BUFFER, YIELD_THRESHOLD))
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProstCodec::<T, U>::raw_decoder(BufferSettings::new(DECODE_BUFFER, YIELD_THRESHOLD))
    }
}
