// SPDX-License-Identifier: GPL-2.0-only

//! The payload uploads of a plan being staged, gathered: a model's weights
//! are thousands of payloads of a few hundred KiB, and a backend with a DMA
//! engine pays a doorbell round trip per transfer, so small payloads go
//! together, up to [`GATHER_BYTES`] a transfer.

use super::blob::{BlobSource, Part};
use crate::device::Device;
use kernel::prelude::*;

/// Bytes of payload one gathered upload moves at most (the PCI backend's
/// piece); a payload this large or larger goes on its own.
const GATHER_BYTES: u64 = 4 << 20;
/// Payloads one gathered upload moves at most.
const GATHER_PARTS: usize = 256;

/// Payloads waiting to be uploaded together.
pub(super) struct Uploads {
    parts: KVec<Part>,
    bytes: u64,
}

impl Uploads {
    /// No payload yet.
    pub(super) fn new() -> Self {
        Self {
            parts: KVec::new(),
            bytes: 0,
        }
    }

    /// Adds `part`, uploading what waits first when it would not fit, and
    /// `part` at once when it is large.
    pub(super) fn add(
        &mut self,
        dev: &Device,
        staged_at: u64,
        src: &(impl BlobSource + ?Sized),
        part: Part,
    ) -> Result {
        if part.len >= GATHER_BYTES {
            self.flush(dev, staged_at, src)?;
            return src.upload(dev, staged_at, part.pa, part.off, part.len);
        }
        if self.bytes + part.len > GATHER_BYTES || self.parts.len() == GATHER_PARTS {
            self.flush(dev, staged_at, src)?;
        }
        self.parts.push(part, GFP_KERNEL_ACCOUNT)?;
        self.bytes += part.len;
        Ok(())
    }

    /// Uploads every waiting payload.
    pub(super) fn flush(
        &mut self,
        dev: &Device,
        staged_at: u64,
        src: &(impl BlobSource + ?Sized),
    ) -> Result {
        if !self.parts.is_empty() {
            src.upload_gathered(dev, staged_at, &self.parts)?;
            self.parts.clear();
            self.bytes = 0;
        }
        Ok(())
    }
}
