export * from "./errors.js";
export { Client, OPERATIONS, VERIFY_FAILURE_FIELDS } from "./client.js";
export type { ClientOptions, JSONObject, Operation, Range, RecordOptions, RequestFilters, Session, VerifyOptions } from "./client.js";
export { startDoppel, findBinary, StartFailed } from "./server.js";
export type { Doppel, StartOptions } from "./server.js";
