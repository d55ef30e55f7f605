//! Device model of one AWS Neuron PCI function (V2 1d0f:7164, V3 1d0f:7364,
//! V4 1d0f:7564), served to
//! QEMU's vfio-user client. The kernel's real PCI core enumerates it and
//! neuron_hbm's PCI driver binds it like hardware: BAR0 carries the MISC RAM
//! firmware mailbox and the UDMA engines, BAR4 the HBM window, BAR2 is
//! absent; the engines reach the guest's memory as the client shares it.

pub mod arch;
pub mod bar0;
pub mod config;
pub mod device;
pub mod guest_mem;
pub mod shared_map;
pub mod udma;
