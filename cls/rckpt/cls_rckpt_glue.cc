// cls_rckpt_glue.cc — registers the `rckpt` object class with the OSD.
// Method bodies are C (cls_rckpt_methods.c, _chunk.c, _job.c); this file only wires them up.
#include "cls_glue.hpp"
#include "rckpt_build_info.h"

extern "C" {
#include "cls_rckpt_methods.h"
}

CLS_VER(0, 1)
CLS_NAME(rckpt)

CLS_INIT(rckpt)
{
	cls_handle_t cls;
	// as Ceph's own classes do: the OSD's log says what it loaded
	CLS_LOG(0, "loading rckpt class %s (built for Ceph %s)", RCKPT_BUILD_VERSION_STRING, RCKPT_CEPH_RELEASE);
	if (!cls_register("rckpt", &cls)) { // 1 on success in Pacific
		CLS_ERR("rckpt: cls_register failed");
		return;
	}
	rckpt_cls_register_rd<cls_rckpt_version>(cls, "version");
	rckpt_cls_register_obj<cls_rckpt_ping>(cls, "ping", CLS_METHOD_RD);
	rckpt_cls_register_obj<cls_rckpt_append>(cls, "append", CLS_METHOD_RD | CLS_METHOD_WR);
	rckpt_cls_register_obj<cls_rckpt_materialize>(cls, "materialize", CLS_METHOD_RD);
	rckpt_cls_register_obj<cls_rckpt_index>(cls, "index", CLS_METHOD_RD);
	rckpt_cls_register_obj<cls_rckpt_trim>(cls, "trim", CLS_METHOD_RD | CLS_METHOD_WR);
	rckpt_cls_register_obj<cls_rckpt_tip>(cls, "tip", CLS_METHOD_RD);
	rckpt_cls_register_obj<cls_rckpt_head>(cls, "head", CLS_METHOD_RD);
	rckpt_cls_register_obj<cls_rckpt_commit>(cls, "commit", CLS_METHOD_RD | CLS_METHOD_WR);
	rckpt_cls_register_obj<cls_rckpt_list>(cls, "list", CLS_METHOD_RD);
	rckpt_cls_register_obj<cls_rckpt_compact>(cls, "compact", CLS_METHOD_RD | CLS_METHOD_WR);
	rckpt_cls_register_obj<cls_rckpt_verify>(cls, "verify", CLS_METHOD_RD);
	rckpt_cls_register_obj<cls_rckpt_drop>(cls, "drop", CLS_METHOD_RD | CLS_METHOD_WR);
	rckpt_cls_register_obj<cls_rckpt_pin>(cls, "pin", CLS_METHOD_RD | CLS_METHOD_WR);
	rckpt_cls_register_obj<cls_rckpt_rewind>(cls, "rewind", CLS_METHOD_RD | CLS_METHOD_WR);
	rckpt_cls_register_obj<cls_rckpt_claim>(cls, "claim", CLS_METHOD_RD | CLS_METHOD_WR);
	rckpt_cls_register_obj<cls_rckpt_retire>(cls, "retire", CLS_METHOD_RD | CLS_METHOD_WR);
	rckpt_cls_register_obj<cls_rckpt_put>(cls, "put", CLS_METHOD_RD | CLS_METHOD_WR);
}
