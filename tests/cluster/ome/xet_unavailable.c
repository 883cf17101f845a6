/*
 * Stands in for OME's Hugging Face download library (libxet, OME's pkg/xet) in the
 * cluster tier's builds of OME's manager and ome-agent (tests/cluster/ome/ and
 * tests/cluster/ome-pvc-backend/).
 *
 * The real library is Rust whose crates come from a git repository, which this
 * project's builds cannot reach; OME's Go code links it through cgo all the same. Nothing
 * the tier runs downloads from Hugging Face (the BaseModel reconcilers and `ome-agent
 * model-metadata` never call it), so every function here fails cleanly instead:
 * xet_client_new returns NULL, which OME's Go side turns into an error, and every
 * operation returns an error that says downloads are unavailable in this build. The
 * processes run with XET_DISABLE_GLOBAL_CLIENT=1, so OME does not even try at start.
 *
 * Implements the ten functions of pkg/xet/xet.h (the same in OME v0.1.5 and v1.2.2),
 * compiled against that header from each module.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */

#include <stdlib.h>
#include <string.h>

#include "xet.h"

enum { XET_INVALID_CONFIG = 1 };

static const char UNAVAILABLE[] =
    "Hugging Face downloads are unavailable: this OME build links a stand-in for libxet "
    "(ome-basemodel-hook tests/cluster/ome/xet_unavailable.c)";

static XetError *unavailable(void) {
    XetError *err = calloc(1, sizeof *err);
    if (err == NULL) {
        return NULL;
    }
    err->code = XET_INVALID_CONFIG;
    err->message = strdup(UNAVAILABLE);
    err->details = NULL;
    return err;
}

void xet_version_1_0_0(void) {}

XetClient *xet_client_new(const XetConfig *config) {
    (void)config;
    return NULL;
}

void xet_client_free(XetClient *client) { (void)client; }

XetError *xet_client_set_progress_callback(XetClient *client, XetProgressCallback callback,
                                           void *user_data, uint32_t throttle_ms) {
    (void)client;
    (void)callback;
    (void)user_data;
    (void)throttle_ms;
    return unavailable();
}

XetError *xet_list_files(XetClient *client, const char *repo_id, const char *revision,
                         XetFileList **out_files) {
    (void)client;
    (void)repo_id;
    (void)revision;
    *out_files = NULL;
    return unavailable();
}

XetError *xet_download_file(XetClient *client, const XetDownloadRequest *request,
                            const XetCancellationToken *cancel_token, char **out_path) {
    (void)client;
    (void)request;
    (void)cancel_token;
    *out_path = NULL;
    return unavailable();
}

XetError *xet_download_snapshot(XetClient *client, const char *repo_id, const char *repo_type,
                                const char *revision, const char *local_dir,
                                const XetCancellationToken *cancel_token, char **out_path) {
    (void)client;
    (void)repo_id;
    (void)repo_type;
    (void)revision;
    (void)local_dir;
    (void)cancel_token;
    *out_path = NULL;
    return unavailable();
}

void xet_free_error(XetError *err) {
    if (err == NULL) {
        return;
    }
    free(err->message);
    free(err->details);
    free(err);
}

void xet_free_file_list(XetFileList *list) {
    if (list == NULL) {
        return;
    }
    for (size_t i = 0; i < list->count; i++) {
        free(list->files[i].path);
        free(list->files[i].hash);
    }
    free(list->files);
    free(list);
}

void xet_free_string(char *str) { free(str); }
