//! The OpenAPI 3.1 document of the API, served at `/api/v1/openapi.json`. A test checks that every
//! operation it lists is routed.

use axum::Json;
use serde_json::{Value, json};

/// The document.
pub fn spec() -> Value {
    let error = json!({ "$ref": "#/components/responses/Error" });
    let id = |what: &str| json!({ "name": "id", "in": "path", "required": true, "description": format!("{what} id"), "schema": { "type": "integer" } });
    let filters = json!([
        { "name": "class", "in": "query", "schema": { "type": "string" } },
        { "name": "rule", "in": "query", "schema": { "type": "string" } },
        { "name": "project", "in": "query", "schema": { "type": "string" } },
        { "name": "since", "in": "query", "description": "Unix milliseconds", "schema": { "type": "integer" } },
        { "name": "q", "in": "query", "description": "words to search for", "schema": { "type": "string" } },
        { "name": "limit", "in": "query", "schema": { "type": "integer", "minimum": 1, "maximum": 200 } },
        { "name": "offset", "in": "query", "schema": { "type": "integer", "minimum": 0 } }
    ]);
    let mut incident_filters = filters.clone();
    if let Some(list) = incident_filters.as_array_mut() {
        list.push(json!({ "name": "diagnosed", "in": "query", "description": "false: only the incidents in which no rule found a root cause or a symptom (the failures the rule base does not know yet); true: the others", "schema": { "type": "boolean" } }));
    }
    let ok = |schema: &str| json!({ "description": "OK", "content": { "application/json": { "schema": { "$ref": format!("#/components/schemas/{schema}") } } } });
    let bearer = json!([{ "bearer": [] }]);
    let snapshot_upload = json!({ "post": {
                "summary": "Attach a tensor snapshot (safetensors or .npz) of the failing step; a replay job checks the diagnosis's causes on it",
                "security": bearer,
                "parameters": [id("incident"), { "name": "params", "in": "query", "style": "form", "explode": true, "description": "snapshot parameters as key=value (num_classes=2&role.labels=y), raw body only", "schema": { "type": "object", "additionalProperties": { "type": "string" } } }],
                "requestBody": { "required": true, "content": {
                    "application/octet-stream": { "schema": { "type": "string", "format": "binary" } },
                    "multipart/form-data": { "schema": { "type": "object", "required": ["snapshot"], "properties": {
                        "snapshot": { "type": "string", "format": "binary" },
                        "params": { "type": "string", "description": "a JSON object of parameters, or key=value lines" } } } }
                } },
                "responses": { "202": { "description": "Stored; the replay job is queued", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/SnapshotAccepted" } } } },
                               "400": error, "401": error, "404": error, "413": error, "415": error, "422": error, "503": error }
            } });
    let replay_job = json!({ "get": {
                "summary": "A replay job: state, attempts, check results, and its snapshot's summary", "parameters": [id("replay job")],
                "responses": { "200": ok("ReplayJob"), "404": error }
            } });
    let snapshot_accepted = json!({ "type": "object", "required": ["snapshot_id", "job_id", "status_url"], "properties": {
                    "snapshot_id": { "type": "integer" }, "job_id": { "type": "integer" }, "status_url": { "type": "string" } } });
    let replay_job_schema = json!({ "type": "object", "properties": {
                    "id": { "type": "integer" }, "incident_id": { "type": "integer" }, "snapshot_id": { "type": "integer" },
                    "state": { "enum": ["queued", "running", "done", "failed"] }, "attempts": { "type": "integer" }, "max_attempts": { "type": "integer" },
                    "results": { "type": "array", "items": { "type": "object", "properties": {
                        "check": { "type": "string" }, "verdict": { "enum": ["confirmed", "refuted", "inconclusive"] }, "summary": { "type": "string" },
                        "tensor": { "type": "string" }, "elements": { "type": "integer" }, "offending": { "type": "integer" }, "backend": { "type": "string" } } } },
                    "error": { "type": ["string", "null"] },
                    "snapshot": { "type": "object", "properties": { "sha256": { "type": "string" }, "bytes": { "type": "integer" }, "stored": { "type": "boolean" }, "summary": { "type": "object" } } } } });
    let analyze = json!({ "post": {
                "summary": "Analyze a log, or a distributed job's files (a bundle: each rank's log, dmesg, torchrun error files, nvidia-smi / DCGM reports, flight-recorder dumps, or a .zip / .tar.gz of them); store it as an incident unless store=false. One log (or files that come to one) answers AnalyzeResponse exactly as before; several answer BundleResponse (kind: bundle). The whole body is bounded by max_body_bytes; an archive that inflates past bundle_max_inflated_bytes is refused (422)",
                "security": bearer,
                "parameters": [
                    { "name": "store", "in": "query", "schema": { "type": "boolean", "default": true } },
                    { "name": "project", "in": "query", "schema": { "type": "string" } },
                    { "name": "source", "in": "query", "schema": { "type": "string" } },
                    { "name": "commit", "in": "query", "schema": { "type": "string" } },
                    { "name": "job_url", "in": "query", "schema": { "type": "string" } },
                    { "name": "tags", "in": "query", "description": "comma-separated", "schema": { "type": "string" } }
                ],
                "requestBody": { "required": true, "content": {
                    "text/plain": { "schema": { "type": "string" } },
                    "application/json": { "schema": { "$ref": "#/components/schemas/AnalyzeRequest" } },
                    "multipart/form-data": { "schema": { "type": "object", "description": "each part with a file name is a file of the bundle (flight-recorder pickles and .zip / .tar.gz archives as they are); plain fields are metadata; any other plain part is refused (400). A flight-recorder pickle is analysed and kept as its content in JSON; any other binary file (a core dump, an image, a profiler report) is neither analysed nor kept, and the diagnosis's warnings say so (code binary_left_out); a bundle with no file left to read is refused (422)", "properties": {
                        "file": { "type": "array", "items": { "type": "string", "format": "binary" } },
                        "project": { "type": "string" }, "source": { "type": "string" }, "commit": { "type": "string" },
                        "job_url": { "type": "string" }, "tags": { "type": "string", "description": "comma-separated" } } } }
                } },
                "responses": { "200": { "description": "OK", "content": { "application/json": { "schema": { "oneOf": [
                    { "$ref": "#/components/schemas/AnalyzeResponse" }, { "$ref": "#/components/schemas/BundleResponse" } ] } } } },
                    "400": error, "401": error, "413": error, "415": error, "422": error, "429": error, "503": error }
            } });
    let bundle_file = json!({ "get": {
                "summary": "A file of a bundle incident (its place in the bundle, from 0), as it was kept and analysed: a text file's redacted text (text/plain); a flight-recorder pickle's content as JSON (application/json: the keys and nesting of torch's own JSON dump, each string and key-value pair redacted; the file's kept_as names it, fr_3.json for fr_3)",
                "parameters": [id("incident"), { "name": "file", "in": "path", "required": true, "schema": { "type": "integer", "minimum": 0 } }],
                "responses": { "200": { "description": "OK", "content": { "text/plain": { "schema": { "type": "string" } }, "application/json": { "schema": { "type": "object", "description": "a flight-recorder dump: version, pg_config, pg_status, entries, …" } } } }, "400": error, "404": error }
            } });
    let offenders = json!({ "get": {
                "summary": "Repeat offenders: GPUs (by UUID, else host and bus id) and hosts that were the first fault of incidents of more than one job (incidents with the same job_url count once), flagged from the offender_threshold setting (default 3 jobs)",
                "responses": { "200": ok("Offenders") }
            } });
    let bundle_schemas = json!({
                "BundleDiagnosis": { "type": "object", "required": ["format_version", "coverage", "ranks", "timeline", "files"], "description": "a distributed job's diagnosis (the same document as faultline analyze --format json FILES…)", "properties": {
                    "format_version": { "type": "integer" },
                    "first_fault": { "type": "object", "description": "the earliest failure that is not a cascade of another: kind, summary, rank, host, local_rank, gpu, collective, cause, xid, at_us, confidence, reasons, evidence (per file)" },
                    "cascades": { "type": "array", "items": { "type": "object", "properties": { "summary": { "type": "string" }, "what": { "type": "string" }, "ranks": { "type": "array", "items": { "type": "integer" } } } } },
                    "missing": { "type": "array", "items": { "type": "string" } },
                    "collectives": { "type": "array", "description": "per process group: the stalled collective, each rank's last enqueued / started / completed sequence number, never_entered, desync", "items": { "type": "object" } },
                    "xids": { "type": "array", "description": "NVIDIA Xid events with meaning, origin, settled origin and actions", "items": { "type": "object" } },
                    "coverage": { "type": "object" }, "ranks": { "type": "array", "items": { "type": "object" } }, "hosts": { "type": "array", "items": { "type": "string" } },
                    "clock_offsets": { "type": "array", "items": { "type": "object" } }, "timeline": { "type": "array", "items": { "type": "object" } },
                    "files": { "type": "array", "description": "each file read: name, kind, bytes, lines, ranks, host, its single-log diagnosis", "items": { "type": "object" } },
                    "warnings": { "type": "array", "description": "code and message of each problem met; binary_left_out names a binary file that is not a format faultline reads (file \"x.bin\": binary, not a format faultline reads; not analysed and not kept)", "items": { "type": "object", "properties": { "code": { "type": "string" }, "message": { "type": "string" } } } } } },
                "BundleResponse": { "allOf": [ { "$ref": "#/components/schemas/BundleDiagnosis" }, { "type": "object", "required": ["kind"], "properties": {
                    "kind": { "const": "bundle" }, "incident_id": { "type": "integer" }, "group_id": { "type": "integer" }, "new_group": { "type": "boolean" } } } ] },
                "Offender": { "type": "object", "required": ["kind", "key", "jobs", "incidents", "flagged"], "properties": {
                    "kind": { "enum": ["gpu", "host"] }, "key": { "type": "string", "description": "uuid:GPU-…, bus:HOST/0000:3b:00, or the host name" },
                    "host": { "type": "string" }, "gpu": { "type": "object", "properties": { "index": { "type": "integer" }, "bus_id": { "type": "string" }, "uuid": { "type": "string" } } },
                    "jobs": { "type": "integer" }, "incidents": { "type": "array", "items": { "type": "integer" } },
                    "projects": { "type": "array", "items": { "type": "string" } }, "last_seen": { "type": "integer" }, "flagged": { "type": "boolean" } } },
                "Offenders": { "type": "object", "properties": { "threshold": { "type": "integer" },
                    "gpus": { "type": "array", "items": { "$ref": "#/components/schemas/Offender" } },
                    "hosts": { "type": "array", "items": { "$ref": "#/components/schemas/Offender" } } } }
    });
    let mut document = json!({
        "openapi": "3.1.0",
        "info": {
            "title": "faultline",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Diagnoses PyTorch / CUDA / Hugging Face training failures from their logs and keeps every incident as team knowledge. Writes need `Authorization: Bearer <token>`; errors are `{error, detail}`."
        },
        "paths": {
            "/api/v1/analyze": analyze,
            "/api/v1/incidents": { "get": {
                "summary": "Incidents, newest first", "parameters": incident_filters,
                "responses": { "200": ok("IncidentPage"), "400": error, "429": error }
            } },
            "/api/v1/incidents/{id}": { "get": {
                "summary": "An incident with its log, diagnosis, feedback and group", "parameters": [id("incident")],
                "responses": { "200": ok("Incident"), "404": error }
            } },
            "/api/v1/incidents/{id}/similar": { "get": {
                "summary": "Similar incidents: the same group first, then by text",
                "parameters": [id("incident"), { "name": "limit", "in": "query", "schema": { "type": "integer" } }],
                "responses": { "200": { "description": "OK", "content": { "application/json": { "schema": { "type": "array", "items": { "$ref": "#/components/schemas/IncidentSummary" } } } } }, "404": error }
            } },
            "/api/v1/incidents/{id}/feedback": { "post": {
                "summary": "Say whether the diagnosis was right and whether the fix worked",
                "security": bearer, "parameters": [id("incident")],
                "requestBody": { "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/FeedbackInput" } } } },
                "responses": { "201": ok("Feedback"), "400": error, "401": error, "404": error, "422": error }
            } },
            "/api/v1/incidents/{id}/files/{file}": bundle_file,
            "/api/v1/offenders": offenders,
            "/api/v1/incidents/{id}/snapshots": snapshot_upload,
            "/api/v1/replay/jobs/{id}": replay_job,
            "/api/v1/groups": { "get": {
                "summary": "Groups of incidents, most recently seen first", "parameters": filters,
                "responses": { "200": ok("GroupPage"), "400": error }
            } },
            "/api/v1/groups/{id}": { "get": {
                "summary": "A group: count, first and last seen, trend, projects, daily counts, notes",
                "parameters": [id("group"), { "name": "days", "in": "query", "schema": { "type": "integer" } }],
                "responses": { "200": ok("Group"), "404": error }
            } },
            "/api/v1/groups/{id}/notes": { "post": {
                "summary": "Add a note to a group", "security": bearer, "parameters": [id("group")],
                "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "required": ["body"], "properties": { "body": { "type": "string" } } } } } },
                "responses": { "201": ok("Note"), "400": error, "401": error, "404": error, "422": error }
            } },
            "/api/v1/rules": { "get": {
                "summary": "Rules with hit counts and feedback precision",
                "responses": { "200": { "description": "OK", "content": { "application/json": { "schema": { "type": "array", "items": { "$ref": "#/components/schemas/RuleSummary" } } } } } }
            } },
            "/api/v1/rules/{id}": { "get": {
                "summary": "A rule: patterns, causes, fixes, examples, hits over time",
                "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }, { "name": "days", "in": "query", "schema": { "type": "integer" } }],
                "responses": { "200": ok("RuleDetail"), "404": error }
            } },
            "/api/v1/rules/backtest": { "post": {
                "summary": "Run a candidate rule (TOML) over the latest stored incidents: needs a token in every access mode, one at a time (429 while another runs), stops before the request's timeout (complete: false, stopped: why)",
                "security": bearer,
                "parameters": [{ "name": "limit", "in": "query", "schema": { "type": "integer", "minimum": 1, "maximum": 10000 } }],
                "requestBody": { "required": true, "content": {
                    "text/plain": { "schema": { "type": "string", "description": "the rule file" } },
                    "application/json": { "schema": { "type": "object", "required": ["rule"], "properties": { "rule": { "type": "string" } } } }
                } },
                "responses": { "200": ok("BacktestReport"), "400": error, "401": error, "422": error, "429": error }
            } },
            "/api/v1/ping": { "post": {
                "summary": "Connectivity check: answers the size of the body it was sent",
                "requestBody": { "content": { "text/plain": { "schema": { "type": "string" } } } },
                "responses": { "200": { "description": "OK", "content": { "application/json": { "schema": { "type": "object", "properties": { "bytes": { "type": "integer" } } } } } }, "413": error }
            } },
            "/api/v1/openapi.json": { "get": { "summary": "This document", "responses": { "200": { "description": "OK" } } } },
            "/healthz": { "get": { "summary": "The process answers", "responses": { "200": { "description": "OK" } } } },
            "/readyz": { "get": { "summary": "The database answers", "responses": { "200": { "description": "OK" }, "503": error } } },
            "/metrics": { "get": { "summary": "Prometheus metrics", "responses": { "200": { "description": "OK", "content": { "text/plain": { "schema": { "type": "string" } } } } } } }
        },
        "components": {
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } },
            "responses": { "Error": { "description": "An error", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } } },
            "schemas": {
                "Error": { "type": "object", "required": ["error", "detail"], "properties": { "error": { "type": "string" }, "detail": { "type": "string" } } },
                "AnalyzeRequest": { "type": "object", "description": "one log, or a bundle's text files: log or files, not both", "properties": {
                    "log": { "type": "string" },
                    "files": { "type": "array", "items": { "type": "object", "required": ["name", "content"], "properties": {
                        "name": { "type": "string", "description": "unique within the bundle (rank3.log, node-2/dmesg.txt)" }, "content": { "type": "string" } } } },
                    "project": { "type": "string" }, "source": { "type": "string" },
                    "commit": { "type": "string" }, "job_url": { "type": "string" }, "tags": { "type": "array", "items": { "type": "string" } } } },
                "EvidenceLine": { "type": "object", "required": ["line", "text"], "properties": {
                    "line": { "type": "integer" }, "text": { "type": "string" }, "rank": { "type": "integer" }, "repeats": { "type": "integer" } } },
                "Finding": { "type": "object", "required": ["rule", "class", "role", "confidence", "evidence", "causes", "fixes"], "properties": {
                    "rule": { "type": "string" }, "class": { "type": "string" }, "title": { "type": "string" }, "summary": { "type": "string" },
                    "role": { "enum": ["root", "symptom", "context"] }, "confidence": { "enum": ["high", "medium", "low"] },
                    "tier": { "enum": ["pattern", "confirmed", "refuted"] },
                    "origin": { "enum": ["rule", "detector"], "description": "detector: a class detector (rules/detect/) found it, never at high confidence; no specific rule knows this wording yet" },
                    "evidence": { "type": "array", "items": { "$ref": "#/components/schemas/EvidenceLine" } },
                    "captures": { "type": "object", "additionalProperties": { "type": "string" } },
                    "causes": { "type": "array", "items": { "type": "object" } }, "fixes": { "type": "array", "items": { "type": "object" } },
                    "next_artifact": { "type": "string" } } },
                "Diagnosis": { "type": "object", "required": ["format_version", "lines", "findings"], "properties": {
                    "format_version": { "type": "integer" }, "lines": { "type": "integer" }, "bytes": { "type": "integer" },
                    "fingerprint": { "type": "string" }, "findings": { "type": "array", "items": { "$ref": "#/components/schemas/Finding" } },
                    "unexplained_error": { "description": "with no root cause or symptom found: the exception the log's last traceback ends with", "$ref": "#/components/schemas/EvidenceLine" },
                    "environment": { "type": "object" }, "warnings": { "type": "array" } } },
                "AnalyzeResponse": { "allOf": [ { "$ref": "#/components/schemas/Diagnosis" }, { "type": "object", "properties": {
                    "incident_id": { "type": "integer" }, "group_id": { "type": "integer" }, "new_group": { "type": "boolean" } } } ] },
                "IncidentSummary": { "type": "object", "properties": {
                    "id": { "type": "integer" }, "created_at": { "type": "integer" }, "group_id": { "type": ["integer", "null"] },
                    "project": { "type": ["string", "null"] }, "class": { "type": ["string", "null"] }, "rule": { "type": ["string", "null"] },
                    "title": { "type": ["string", "null"] }, "tags": { "type": "array", "items": { "type": "string" } },
                    "diagnosed": { "type": "boolean", "description": "a rule found a root cause or a symptom" },
                    "unexplained_error": { "type": "string", "description": "when not diagnosed: the exception the log ends with" } } },
                "IncidentPage": { "type": "object", "properties": { "items": { "type": "array", "items": { "$ref": "#/components/schemas/IncidentSummary" } }, "next_offset": { "type": ["integer", "null"] } } },
                "Incident": { "allOf": [ { "$ref": "#/components/schemas/IncidentSummary" }, { "type": "object", "properties": {
                    "log": { "type": "string" }, "diagnosis": { "$ref": "#/components/schemas/Diagnosis" },
                    "bundle": { "$ref": "#/components/schemas/BundleDiagnosis", "description": "a distributed job's incident: its bundle (log and diagnosis are then the first fault's file's)" },
                    "files": { "type": "array", "items": { "type": "object", "properties": { "ordinal": { "type": "integer" }, "name": { "type": "string" }, "kind": { "type": "string" }, "bytes": { "type": "integer" }, "lines": { "type": "integer" }, "binary": { "type": "boolean", "description": "not text when submitted (a flight-recorder pickle)" }, "kept_as": { "type": "string", "description": "the name of the form the file is kept in, when not the form it came in: fr_3.json for the pickle fr_3 (its content in JSON)" } } } },
                    "feedback": { "type": "array", "items": { "$ref": "#/components/schemas/Feedback" } } } } ] },
                "FeedbackInput": { "type": "object", "properties": {
                    "rule": { "type": "string" }, "verdict": { "enum": ["right", "wrong"] }, "fix_worked": { "type": "boolean" }, "comment": { "type": "string" } } },
                "Feedback": { "type": "object", "properties": { "id": { "type": "integer" }, "incident_id": { "type": "integer" }, "verdict": { "type": ["string", "null"] } } },
                "GroupSummary": { "type": "object", "properties": {
                    "id": { "type": "integer" }, "fingerprint": { "type": "string" }, "class": { "type": "string" }, "title": { "type": "string" },
                    "count": { "type": "integer" }, "first_seen": { "type": "integer" }, "last_seen": { "type": "integer" } } },
                "GroupPage": { "type": "object", "properties": { "items": { "type": "array", "items": { "$ref": "#/components/schemas/GroupSummary" } }, "next_offset": { "type": ["integer", "null"] } } },
                "Group": { "allOf": [ { "$ref": "#/components/schemas/GroupSummary" }, { "type": "object", "properties": {
                    "trend": { "enum": ["rising", "falling", "steady"] }, "projects": { "type": "array" }, "daily": { "type": "array" },
                    "notes": { "type": "array", "items": { "$ref": "#/components/schemas/Note" } }, "recent": { "type": "array" } } } ] },
                "Note": { "type": "object", "properties": { "id": { "type": "integer" }, "group_id": { "type": "integer" }, "body": { "type": "string" } } },
                "RuleSummary": { "type": "object", "properties": {
                    "id": { "type": "string" }, "class": { "type": "string" }, "title": { "type": "string" }, "priority": { "type": "integer" },
                    "stats": { "type": "object", "properties": { "hits": { "type": "integer" }, "precision": { "type": ["number", "null"] } } } } },
                "RuleDetail": { "allOf": [ { "$ref": "#/components/schemas/RuleSummary" }, { "type": "object", "properties": {
                    "patterns": { "type": "object" }, "causes": { "type": "array" }, "fixes": { "type": "array" }, "examples": { "type": "array" } } } ] },
                "SnapshotAccepted": snapshot_accepted,
                "ReplayJob": replay_job_schema,
                "BacktestReport": { "type": "object", "properties": {
                    "rule": { "type": "string" }, "scanned": { "type": "integer" }, "distinct_logs": { "type": "integer" }, "matched": { "type": "array" }, "takes_primary": { "type": "integer" },
                    "complete": { "type": "boolean" }, "stopped": { "type": "string" } } }
            }
        }
    });
    if let (Some(schemas), Some(more)) = (
        document
            .pointer_mut("/components/schemas")
            .and_then(Value::as_object_mut),
        bundle_schemas.as_object(),
    ) {
        schemas.extend(more.clone());
    }
    document
}

pub(super) async fn document() -> Json<Value> {
    Json(spec())
}
