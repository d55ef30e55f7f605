// SPDX-License-Identifier: GPL-2.0-only

//! A misc device node with a mode, sysfs attributes, and data that every file
//! opened on it starts from.
//!
//! The kernel crate's `MiscDeviceRegistration` registers with the default
//! mode and no attribute groups, and gives `open` only the registration.
//! [`MiscNode`] registers the `struct miscdevice` itself (inside the C
//! `struct nhbm_misc_node`, with the values sysfs.c shows) and hands `open`
//! the node's data. It goes away once `MiscDeviceOptions` takes a mode and
//! attribute groups and the registration carries data for `open`.

use crate::{
    abstractions::helpers::{nhbm_attr_groups, vm_fault, NHBM_ATTR_COUNT},
    abstractions::vma::{Backing, Fault, NewMapping, Space},
};
use core::marker::PhantomData;
use kernel::{
    bindings, device,
    error::to_result,
    ffi::{c_int, c_ulong, c_void},
    fs::File,
    miscdevice::{MiscDevice, MiscDeviceOptions, MiscDeviceRegistration},
    mm::virt::VmaNew,
    prelude::*,
    seq_file::SeqFile,
    sync::{aref::ARef, Arc},
    types::{ForeignOwnable, Opaque},
};

/// The values of a node's sysfs attributes, indexed by `enum nhbm_attr`.
pub(crate) type AttrValues = [u64; NHBM_ATTR_COUNT as usize];

/// `struct nhbm_misc_node` of helpers.h: a misc device and the values of
/// its sysfs attributes, checked against the C compiler's layout at build
/// time (below) and at run time (`the_node_matches_c`).
#[repr(C)]
struct RawNode {
    misc: bindings::miscdevice,
    attr_values: AttrValues,
}

/// The C compiler's layout of `struct nhbm_misc_node` (layout.c, Kbuild).
// Read only by the assertions below, which rustc 1.85 (Debian 13's) does
// not count as a use.
#[allow(dead_code)]
mod c_layout {
    include!("layout_generated.rs");
}

// sysfs.c reads the values through its own `struct nhbm_misc_node`: the
// build fails unless the mirror has that struct's layout.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<RawNode>() == c_layout::NHBM_MISC_NODE_SIZE);
    assert!(align_of::<RawNode>() == c_layout::NHBM_MISC_NODE_ALIGN);
    assert!(offset_of!(RawNode, misc) == c_layout::NHBM_MISC_NODE_MISC);
    assert!(offset_of!(RawNode, attr_values) == c_layout::NHBM_MISC_NODE_ATTR_VALUES);
};

/// The files of a [`MiscNode`].
pub(crate) trait NodeFile: Sized + Send + Sync {
    /// What the node holds for the files opened on it.
    type Data: Send + Sync;

    /// Opens a file on the node holding `data`, with `space`, the address
    /// space its mappings (and only its) are linked into.
    fn open(file: &File, space: Arc<Space>, data: &Self::Data) -> Result<Pin<KBox<Self>>>;

    /// Handles ioctl `cmd` with argument `arg` on an open file.
    fn ioctl(me: Pin<&Self>, file: &File, cmd: u32, arg: usize) -> Result<isize>;

    /// Writes what `/proc/<pid>/fdinfo/<fd>` shows of an open file to `m`,
    /// after the lines the VFS prints.
    fn show_fdinfo(me: Pin<&Self>, m: &SeqFile, file: &File);
    /// Accepts or refuses `mmap(2)` of `map` on an open file, and says what
    /// backs its pages. The mapping is then filled by [`NodeFile::fault`].
    fn mmap(_me: Pin<&Self>, _file: &File, _map: &NewMapping<'_>) -> Result<Backing> {
        Err(ENODEV)
    }

    /// Fills file page `pgoff` of the faulting mapping of an open file
    /// (`fault` inserts it); an error gives the access `SIGBUS`.
    fn fault(_me: Pin<&Self>, _pgoff: u64, _fault: &Fault<'_>) -> Result {
        Err(EFAULT)
    }
}

/// A registered misc device whose files are `T`s opened from its data.
///
/// # Invariants
///
/// `raw.misc` is registered with `misc_register()` from the time the node is
/// initialized until it is dropped, with the file operations of `Files<T>`;
/// `data` is initialized before it is registered.
#[pin_data(PinnedDrop)]
pub(crate) struct MiscNode<T: NodeFile> {
    data: T::Data,
    /// The device the node sits under in sysfs, held while it is there.
    parent: Option<ARef<device::Device>>,
    #[pin]
    raw: Opaque<RawNode>,
}

// SAFETY: `raw` is touched only by `misc_register`/`misc_deregister`, which
// may run on any thread, and read by sysfs; `data` is `Send`.
unsafe impl<T: NodeFile> Send for MiscNode<T> {}
// SAFETY: `&MiscNode` only hands out `&T::Data`, which is `Sync`.
unsafe impl<T: NodeFile> Sync for MiscNode<T> {}

impl<T: NodeFile> MiscNode<T> {
    /// Registers `/dev/<name>` with permissions `mode`, the attribute groups
    /// of sysfs.c showing `attrs`, and `data` for the files opened on it;
    /// under `parent` in sysfs (`/sys/class/misc/<name>/device`), if given.
    pub(crate) fn register(
        name: &'static CStr,
        mode: u16,
        attrs: AttrValues,
        data: T::Data,
        parent: Option<ARef<device::Device>>,
    ) -> impl PinInit<Self, Error> {
        // `device::Device` is a transparent wrapper of `struct device`.
        let parent_raw = parent.as_deref().map_or(core::ptr::null_mut(), |d| {
            core::ptr::from_ref(d).cast::<bindings::device>().cast_mut()
        });
        try_pin_init!(Self {
            // First: a file can be opened as soon as the node is registered.
            data,
            // Held for as long as the node is registered under it.
            parent,
            raw <- Opaque::try_ffi_init(move |slot: *mut RawNode| {
                let mut misc = MiscDeviceOptions { name }.into_raw::<Files<T>>();
                misc.mode = mode;
                misc.parent = parent_raw;
                // The static, NULL-terminated attribute groups of sysfs.c.
                misc.groups = core::ptr::addr_of!(nhbm_attr_groups).cast_mut().cast();
                // SAFETY: `slot` is valid for writes (pin-init contract).
                unsafe {
                    slot.write(RawNode {
                        misc,
                        attr_values: attrs,
                    })
                };
                // SAFETY: `slot` holds a complete `miscdevice` whose storage is
                // pinned and outlives the registration (deregistered in drop);
                // its parent is NULL or a device that `parent`, a field of
                // this node, holds a reference on until after that.
                to_result(unsafe { bindings::misc_register(&raw mut (*slot).misc) })
            }),
        })
    }

    /// The data the node's files are opened from.
    #[cfg(CONFIG_KUNIT = "y")]
    pub(crate) fn data(&self) -> &T::Data {
        &self.data
    }
}

#[pinned_drop]
impl<T: NodeFile> PinnedDrop for MiscNode<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: `raw.misc` is registered (invariant) and deregistered
        // exactly once, here; `misc_deregister` waits out opens in progress
        // and removes the sysfs attributes before the node is freed.
        unsafe { bindings::misc_deregister(&raw mut (*self.raw.get()).misc) };
    }
}

/// The file operations of every [`MiscNode<T>`]: only `MiscNode::register`
/// registers a misc device with them.
struct Files<T>(PhantomData<T>);

#[vtable]
impl<T: NodeFile> MiscDevice for Files<T> {
    type Ptr = Pin<KBox<T>>;

    fn open(file: &File, misc: &MiscDeviceRegistration<Self>) -> Result<Pin<KBox<T>>> {
        let misc = misc.as_raw();
        // SAFETY: Misc devices with `Files<T>`'s operations are registered
        // only by `MiscNode::<T>::register`, as the `misc` field of the
        // `nhbm_misc_node` (`RawNode`) in the `raw` field of a pinned `MiscNode<T>`
        // (`Opaque` is `repr(transparent)`); `misc_open` runs this while the
        // device is registered, i.e. while the node is alive (its drop
        // deregisters first, waiting for opens in progress).
        let node = unsafe {
            let raw = kernel::container_of!(misc, RawNode, misc);
            &*kernel::container_of!(raw.cast::<Opaque<RawNode>>(), MiscNode<T>, raw)
        };
        // Every file of the node has a space of its own, made before
        // anything can map it: `NewMapping::set_up` counts on it.
        let space = Arc::new(Space::for_file(file)?, GFP_KERNEL_ACCOUNT)?;
        T::open(file, space, &node.data)
    }

    fn ioctl(me: Pin<&T>, file: &File, cmd: u32, arg: usize) -> Result<isize> {
        T::ioctl(me, file, cmd, arg)
    }

    fn show_fdinfo(me: Pin<&T>, m: &SeqFile, file: &File) {
        T::show_fdinfo(me, m, file)
    }

    fn mmap(me: Pin<&T>, file: &File, vma: &VmaNew) -> Result {
        let map = NewMapping::new(vma);
        let backing = T::mmap(me, file, &map)?;
        // SAFETY: every file of a node is opened by `open` above, which
        // gives it a space of its own, held by the `T` it makes (the file's
        // private data) until the file is released.
        unsafe { map.set_up(backing, fault::<T>) }
    }
}

/// The fault handler of the mappings of every [`MiscNode<T>`]'s files.
///
/// # Safety
///
/// `file_data` is the `private_data` of an open file of a node with
/// `Files<T>`'s operations, and `vmf` the fault being handled in one of its
/// mappings (vma_helpers.c calls it so, for mappings `Files::<T>::mmap` set up).
unsafe extern "C" fn fault<T: NodeFile>(
    file_data: *mut c_void,
    pgoff: c_ulong,
    vmf: *mut vm_fault,
) -> c_int {
    // SAFETY: the file's private data is the `Pin<KBox<T>>` that `open`
    // made foreign; the mapping holds the file open, so `release` (which
    // takes it back) has not run.
    let me = unsafe { <Pin<KBox<T>> as ForeignOwnable>::borrow(file_data) };
    // SAFETY: `vmf` is the fault being handled (the caller's contract).
    let Some(fault) = (unsafe { Fault::from_raw(vmf) }) else {
        return EFAULT.to_errno();
    };
    match T::fault(me, pgoff as u64, &fault) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

#[kunit_tests(neuron_hbm_miscdev)]
mod tests {
    use super::*;
    use kernel::{
        ffi::c_void,
        sync::atomic::{Atomic, Relaxed},
    };

    /// A file of a node whose data counts opens.
    struct Probe;

    impl NodeFile for Probe {
        type Data = Atomic<u32>;

        fn open(_file: &File, _space: Arc<Space>, opens: &Atomic<u32>) -> Result<Pin<KBox<Self>>> {
            opens.fetch_add(1, Relaxed);
            Ok(KBox::pin(Probe, GFP_KERNEL)?)
        }

        fn ioctl(_me: Pin<&Self>, _file: &File, _cmd: u32, _arg: usize) -> Result<isize> {
            Err(ENOTTY)
        }

        fn show_fdinfo(_me: Pin<&Self>, _m: &SeqFile, _file: &File) {}
    }

    #[test]
    fn the_node_matches_c() {
        use crate::abstractions::helpers::{nhbm_misc_node_attrs_offset, nhbm_misc_node_size};
        // SAFETY: Two constants of sysfs.c, initialized at build time.
        let (size, attrs) = unsafe { (nhbm_misc_node_size, nhbm_misc_node_attrs_offset) };
        assert_eq!(size, size_of::<RawNode>());
        assert_eq!(attrs, core::mem::offset_of!(RawNode, attr_values));
    }

    const NAME: &CStr = c"neuron_hbm_kunit";

    fn node(mode: u16, attrs: AttrValues) -> Result<Pin<KBox<MiscNode<Probe>>>> {
        KBox::pin_init(
            MiscNode::register(NAME, mode, attrs, Atomic::new(7), None),
            GFP_KERNEL,
        )
    }

    /// The registered misc device's mode, its device's drvdata and devt.
    fn registered(n: &MiscNode<Probe>) -> (u16, *mut c_void, u32, [u64; 4]) {
        let raw = n.raw.get();
        // SAFETY: `raw` is registered (invariant), so `this_device` is the
        // live device `misc_register` created, with the node as drvdata.
        unsafe {
            let dev = (*raw).misc.this_device;
            (
                (*raw).misc.mode,
                bindings::dev_get_drvdata(dev),
                (*dev).devt,
                (*raw).attr_values,
            )
        }
    }

    #[test]
    fn registration_carries_mode_attributes_and_data() -> Result {
        let n = node(0o640, [2, 1, 4, 3])?;
        let (mode, drvdata, devt, attrs) = registered(&n);
        assert_eq!(mode, 0o640);
        // sysfs.c finds the attribute values from the drvdata: the misc device.
        assert_eq!(drvdata.cast::<RawNode>(), n.raw.get());
        assert_eq!(attrs, [2, 1, 4, 3]);
        assert_eq!(devt >> 20, bindings::MISC_MAJOR);
        assert_eq!(n.data().load(Relaxed), 7);
        drop(n);
        // Deregistered with the node: the name is free again.
        let again = node(0o600, [0; 4])?;
        assert_eq!(registered(&again).0, 0o600);
        Ok(())
    }
}
