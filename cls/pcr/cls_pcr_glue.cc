// cls_pcr_glue.cc — registers the `pcr` object class with the OSD.
// Method bodies are C (cls_pcr_methods.c); this file only wires them up.
#include "cls_glue.hpp"
#include "rckpt_build_info.h"

extern "C" {
#include "cls_pcr_methods.h"
}

CLS_VER(0, 1)
CLS_NAME(pcr)

CLS_INIT(pcr)
{
	cls_handle_t cls;
	// as Ceph's own classes do: the OSD's log says what it loaded
	CLS_LOG(0, "loading pcr class %s (built for Ceph %s)", RCKPT_BUILD_VERSION_STRING, RCKPT_CEPH_RELEASE);
	if (!cls_register("pcr", &cls)) { // 1 on success in Pacific
		CLS_ERR("pcr: cls_register failed");
		return;
	}
	rckpt_cls_register_rd<cls_pcr_version>(cls, "version");
	rckpt_cls_register_obj<cls_pcr_read>(cls, "read", CLS_METHOD_RD);
	rckpt_cls_register_obj<cls_pcr_images>(cls, "images", CLS_METHOD_RD);
	rckpt_cls_register_obj<cls_pcr_stat>(cls, "stat", CLS_METHOD_RD);
}
