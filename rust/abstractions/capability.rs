// SPDX-License-Identifier: GPL-2.0-only

//! Capability checks of the calling task; the 7.3 kernel crate has no
//! binding for `capable()` or `ns_capable_noaudit()`.

use kernel::{bindings, prelude::*};

/// Whether the calling task has `CAP_SYS_ADMIN`, audited as the check of a
/// privileged operation is.
pub(crate) fn admin() -> bool {
    // SAFETY: `capable` only reads the current task's credentials.
    unsafe { bindings::capable(bindings::CAP_SYS_ADMIN as i32) }
}

/// Whether the calling task has `CAP_SYS_ADMIN`, leaving no audit record
/// when it has not: for what every caller asks and only root sees more of.
pub(crate) fn admin_quietly() -> bool {
    // SAFETY: `init_user_ns` is the kernel's initial user namespace, static
    // and alive for ever; `ns_capable_noaudit` only reads the current task's
    // credentials against it.
    unsafe {
        bindings::ns_capable_noaudit(
            &raw mut bindings::init_user_ns,
            bindings::CAP_SYS_ADMIN as i32,
        )
    }
}

#[kunit_tests(neuron_hbm_capability)]
mod tests {
    use super::*;

    #[test]
    fn both_checks_agree() {
        // KUnit runs in the insmod task, which has CAP_SYS_ADMIN.
        assert!(admin());
        assert_eq!(admin_quietly(), admin());
    }
}
