// SPDX-License-Identifier: GPL-2.0-only

//! What an open file of a device node shows in `/proc/<pid>/fdinfo/<fd>`:
//! the keys of the kernel's Documentation/gpu/drm-usage-stats.rst, which
//! gputop, nvtop and qmassa read. Pure formatting; `chardev.rs` gathers the
//! figures and prints them.

use kernel::{
    fmt,
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// The `drm-driver` value: the module's name.
const DRIVER: &str = "neuron_hbm";

/// The next `drm-client-id`: one counter for every file of every device, so
/// an id is never given twice while the module is loaded (and needs no
/// `drm-pdev` beside it to be unique).
static NEXT_CLIENT_ID: Atomic<u64> = Atomic::new(1);

/// A new `drm-client-id`, never handed out before.
pub(crate) fn new_client_id() -> u64 {
    NEXT_CLIENT_ID.fetch_add(1, Relaxed)
}

/// `bytes` in drm-usage-stats' units, as the DRM core's
/// `drm_fdinfo_print_size` writes them: a number and its unit (`""`,
/// `" KiB"` or `" MiB"`), the largest of them that holds it exactly.
fn in_units(bytes: u64) -> (u64, &'static str) {
    let mut n = bytes;
    for unit in ["", " KiB"] {
        if n == 0 || n % 1024 != 0 {
            return (n, unit);
        }
        n /= 1024;
    }
    (n, " MiB")
}

/// The fdinfo lines of one open file, each `key:\tvalue\n` as the DRM core
/// prints them.
pub(crate) struct Lines<'a> {
    /// The file's `drm-client-id`.
    pub(crate) client_id: u64,
    /// The PCI function's slot (`0000:00:04.0`), `None` for a simulated
    /// device, which has none: `drm-pdev` is left out.
    pub(crate) pdev: Option<&'a str>,
    /// HBM bytes the file's plans hold on each channel of the device, in
    /// channel order: `drm-total-hbm<N>` and `drm-resident-hbm<N>` (device
    /// memory is always resident).
    pub(crate) channels: &'a [u64],
}

impl fmt::Display for Lines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "drm-driver:\t{DRIVER}")?;
        writeln!(f, "drm-client-id:\t{}", self.client_id)?;
        if let Some(slot) = self.pdev {
            writeln!(f, "drm-pdev:\t{slot}")?;
        }
        for (ch, &bytes) in self.channels.iter().enumerate() {
            let (n, unit) = in_units(bytes);
            writeln!(f, "drm-total-hbm{ch}:\t{n}{unit}")?;
            writeln!(f, "drm-resident-hbm{ch}:\t{n}{unit}")?;
        }
        Ok(())
    }
}

#[kunit_tests(neuron_hbm_fdinfo)]
mod tests {
    use super::*;
    use kernel::str::CString;

    fn text(lines: Lines<'_>) -> Result<CString> {
        CString::try_from_fmt(fmt!("{lines}"))
    }

    #[test]
    fn sizes_take_the_largest_exact_unit() {
        for (bytes, want) in [
            (0, (0, "")),
            (1, (1, "")),
            (1023, (1023, "")),
            (1024, (1, " KiB")),
            (1025, (1025, "")),
            (4096 + 512, (4608, "")),
            (3 << 10, (3, " KiB")),
            ((1 << 20) + 1024, (1025, " KiB")),
            (1 << 20, (1, " MiB")),
            (16 << 30, (16384, " MiB")),
            (u64::MAX, (u64::MAX, "")),
            (u64::MAX - 1023, ((1 << 54) - 1, " KiB")),
        ] {
            assert_eq!(in_units(bytes), want);
        }
    }

    #[test]
    fn a_pci_file_names_its_slot_and_every_channel() -> Result {
        let lines = Lines {
            client_id: 42,
            pdev: Some("0000:00:04.0"),
            channels: &[1 << 20, 0],
        };
        assert_eq!(
            &*text(lines)?,
            c"drm-driver:\tneuron_hbm\n\
              drm-client-id:\t42\n\
              drm-pdev:\t0000:00:04.0\n\
              drm-total-hbm0:\t1 MiB\n\
              drm-resident-hbm0:\t1 MiB\n\
              drm-total-hbm1:\t0\n\
              drm-resident-hbm1:\t0\n"
        );
        Ok(())
    }

    #[test]
    fn a_simulated_file_has_no_pdev() -> Result {
        let lines = Lines {
            client_id: 7,
            pdev: None,
            channels: &[8192],
        };
        assert_eq!(
            &*text(lines)?,
            c"drm-driver:\tneuron_hbm\n\
              drm-client-id:\t7\n\
              drm-total-hbm0:\t8 KiB\n\
              drm-resident-hbm0:\t8 KiB\n"
        );
        Ok(())
    }

    #[test]
    fn client_ids_are_never_given_twice() {
        let a = new_client_id();
        let b = new_client_id();
        assert!(a > 0 && b > a);
    }
}
