// SPDX-License-Identifier: GPL-2.0-only
/*
 * dma-bufs of the module's own (dma_buf.rs): the kernel crate has no dma-buf
 * exporter. A buffer is a handle other processes of the same device import
 * through their own open file of the device node; no device attaches to it
 * and nothing maps it through the buffer's file (design.rst says why), so
 * its operations are the release of its payload and refusals.
 */
#include <linux/dma-buf.h>
#include <linux/err.h>
#include <linux/fcntl.h>
#include <linux/module.h>

#include "helpers.h"

MODULE_IMPORT_NS("DMA_BUF");

static void nhbm_dma_buf_release(struct dma_buf *buf)
{
	struct nhbm_dma_buf_payload *payload = buf->priv;

	payload->release(payload);
}

/* A peer device's attachment could not be revoked at a reset: refused. */
static int nhbm_dma_buf_attach(struct dma_buf *buf, struct dma_buf_attachment *at)
{
	return -EOPNOTSUPP;
}

/* Required by dma_buf_export; never reached, as no attachment exists. */
static struct sg_table *nhbm_dma_buf_map(struct dma_buf_attachment *at,
					 enum dma_data_direction dir)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static void nhbm_dma_buf_unmap(struct dma_buf_attachment *at, struct sg_table *sgt,
			       enum dma_data_direction dir)
{
}

static const struct dma_buf_ops nhbm_dma_buf_ops = {
	.attach = nhbm_dma_buf_attach,
	.map_dma_buf = nhbm_dma_buf_map,
	.unmap_dma_buf = nhbm_dma_buf_unmap,
	.release = nhbm_dma_buf_release,
};

int nhbm_dma_buf_export(struct nhbm_dma_buf_payload *payload, u64 size, struct file **out)
{
	DEFINE_DMA_BUF_EXPORT_INFO(info);
	struct dma_buf *buf;

	info.ops = &nhbm_dma_buf_ops;
	info.size = size;
	info.flags = O_RDONLY;
	info.priv = payload;
	buf = dma_buf_export(&info);
	if (IS_ERR(buf))
		return PTR_ERR(buf);
	*out = buf->file;
	return 0;
}

int nhbm_dma_buf_get(int fd, struct dma_buf **out)
{
	struct dma_buf *buf = dma_buf_get(fd);

	if (IS_ERR(buf))
		return PTR_ERR(buf);
	if (buf->ops != &nhbm_dma_buf_ops) {
		dma_buf_put(buf);
		return -EINVAL;
	}
	*out = buf;
	return 0;
}

struct nhbm_dma_buf_payload *nhbm_dma_buf_payload(struct dma_buf *buf)
{
	return buf->priv;
}

void nhbm_dma_buf_put(struct dma_buf *buf)
{
	dma_buf_put(buf);
}
