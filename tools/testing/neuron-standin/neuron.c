// SPDX-License-Identifier: GPL-2.0-only
/*
 * A stand-in for AWS's `neuron` driver (aws-neuronx-dkms) in make
 * check-distro: a PCI driver of that name with the same id table
 * (aws-neuron-driver, neuron_pci.c:30-39), which binds every function it
 * matches and does nothing else. It shows which driver a host with both
 * modules gives each Neuron function.
 */
#include <linux/module.h>
#include <linux/pci.h>

static const struct pci_device_id neuron_ids[] = {
	{ PCI_DEVICE(0x1d0f, 0x7164) },
	{ PCI_DEVICE(0x1d0f, 0x7264) },
	{ PCI_DEVICE(0x1d0f, 0x7364) },
	{ PCI_DEVICE(0x1d0f, 0x7564) },
	{ PCI_DEVICE(0x1d0f, 0x7565) },
	{ }
};
MODULE_DEVICE_TABLE(pci, neuron_ids);

static int neuron_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	pci_info(pdev, "bound by the neuron stand-in\n");
	return 0;
}

static void neuron_remove(struct pci_dev *pdev)
{
}

static struct pci_driver neuron_driver = {
	.name = "neuron",
	.id_table = neuron_ids,
	.probe = neuron_probe,
	.remove = neuron_remove,
};
module_pci_driver(neuron_driver);

MODULE_DESCRIPTION("Stand-in for AWS's neuron driver (make check-distro)");
MODULE_LICENSE("GPL");
