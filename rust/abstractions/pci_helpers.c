// SPDX-License-Identifier: GPL-2.0-only
/*
 * device_has_driver_override() is a static inline that takes the device's
 * driver_override lock, out of reach of Rust: this wrapper makes it
 * callable for a PCI function.
 */
#include <linux/device.h>
#include <linux/pci.h>

#include "helpers.h"

bool nhbm_pci_driver_override_set(struct pci_dev *pdev)
{
	return device_has_driver_override(&pdev->dev);
}
