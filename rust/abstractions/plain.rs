// SPDX-License-Identifier: GPL-2.0-only

//! Plain C structs: `repr(C)`, no padding and only plain fields, so that
//! the kernel crate's user copies may read and write them as bytes.
//!
//! [`plain_struct!`] defines such a struct and implements
//! [`FromBytes`](kernel::transmute::FromBytes) and
//! [`AsBytes`](kernel::transmute::AsBytes) for it once the compiler has
//! checked both conditions: the fields' sizes add up to the struct's, and
//! every field type is itself `FromBytes` and `AsBytes`.

/// Defines a `repr(C)` struct of plain fields with no padding, and makes it
/// `FromBytes` and `AsBytes`; the build fails if it has padding or a field
/// that is not plain.
macro_rules! plain_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $($(#[$fmeta:meta])* $fvis:vis $field:ident: $fty:ty),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[repr(C)]
        $vis struct $name {
            $($(#[$fmeta])* $fvis $field: $fty),*
        }

        const _: () = {
            const fn plain<T: ::kernel::transmute::FromBytes + ::kernel::transmute::AsBytes>() {}
            $(plain::<$fty>();)*
            assert!(::core::mem::size_of::<$name>() == 0 $(+ ::core::mem::size_of::<$fty>())*);
        };

        // SAFETY: `$name` is `repr(C)`, its fields' sizes add up to its own, so
        // it has no padding, and every field is `FromBytes` (both asserted
        // just above): every byte pattern is a valid value.
        unsafe impl ::kernel::transmute::FromBytes for $name {}
        // SAFETY: No padding and `AsBytes` fields (asserted above): every
        // byte of a value is initialized.
        unsafe impl ::kernel::transmute::AsBytes for $name {}
    };
}
pub(crate) use plain_struct;
