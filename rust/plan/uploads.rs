// SPDX-License-Identifier: GPL-2.0-only

//! The payload uploads and the scrubs of a plan being staged, gathered: a
//! model's weights are thousands of payloads of a few hundred KiB with
//! alignment padding between them, and a backend with a DMA engine pays a
//! doorbell round trip per transfer, so small payloads go together, and
//! small scrubs together, up to [`GATHER_BYTES`] a transfer.

use super::blob::{BlobSource, Part};
use crate::device::Device;
use kernel::prelude::*;

/// Bytes of payload one gathered upload moves at most (the PCI backend's
/// piece); a payload this large or larger goes on its own.
const GATHER_BYTES: u64 = 16 << 20;
/// Payloads (or ranges) one gathered upload (or scrub) moves at most.
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

/// Scrubs device ranges, merging each range with the previous one when they
/// touch, and gathering the small ones: the padding between a thousand
/// aligned records costs a few gathered scrubs, not a thousand.
pub(super) struct Scrub<'a> {
    /// The device scrubbed.
    pub(super) dev: &'a Device,
    /// Reset epoch of the plan being staged.
    pub(super) staged_at: u64,
    start: u64,
    end: u64,
    /// Finished ranges (device PA, length) waiting to be scrubbed together.
    gathered: KVec<(u64, u64)>,
    gathered_bytes: u64,
}

impl<'a> Scrub<'a> {
    /// Nothing to scrub yet on `dev`, for a plan staged at `staged_at`.
    pub(super) fn new(dev: &'a Device, staged_at: u64) -> Self {
        Self {
            dev,
            staged_at,
            start: 0,
            end: 0,
            gathered: KVec::new(),
            gathered_bytes: 0,
        }
    }

    /// Adds `[start, end)`; the pending range is set aside first unless the
    /// new one continues it.
    pub(super) fn add(&mut self, start: u64, end: u64) -> Result {
        if start == end {
            return Ok(());
        }
        if start != self.end {
            self.set_aside()?;
            self.start = start;
        }
        self.end = end;
        Ok(())
    }

    /// Scrubs every range added so far.
    pub(super) fn flush(&mut self) -> Result {
        self.set_aside()?;
        self.scrub_gathered()
    }

    /// Ends the pending range: scrubbed at once when it is large, else
    /// gathered with others (those waiting scrubbed first when it would not
    /// fit).
    fn set_aside(&mut self) -> Result {
        let len = self.end - self.start;
        let start = self.start;
        self.start = self.end;
        if len == 0 {
            return Ok(());
        }
        if len >= GATHER_BYTES {
            return self.dev.zero(self.staged_at, start, len);
        }
        if self.gathered_bytes + len > GATHER_BYTES || self.gathered.len() == GATHER_PARTS {
            self.scrub_gathered()?;
        }
        self.gathered.push((start, len), GFP_KERNEL_ACCOUNT)?;
        self.gathered_bytes += len;
        Ok(())
    }

    /// Scrubs the gathered ranges together.
    fn scrub_gathered(&mut self) -> Result {
        if !self.gathered.is_empty() {
            self.dev.zero_gathered(self.staged_at, &self.gathered)?;
            self.gathered.clear();
            self.gathered_bytes = 0;
        }
        Ok(())
    }
}
