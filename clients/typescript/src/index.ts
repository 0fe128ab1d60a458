// @ontimehq/client: the Node.js client of ontime's HTTP API v1.
export * from "./client.js";
export * from "./errors.js";
export { verifySignature, type VerifyOptions } from "./signature.js";
export type { components, operations, paths } from "./openapi.js";
