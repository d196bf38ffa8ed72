// `resilient-llm/ai-sdk`: a Vercel AI SDK language model (specification "v4", as @ai-sdk/provider
// 4 and the `ai` 7 package define it) over a ResilientClient. The shapes are declared here
// structurally, so the package needs no dependency on @ai-sdk/provider; the returned model is
// assignable to its `LanguageModelV4`.

/** What the model needs of a client: `chat` and `stream` (a `ResilientClient`). */
export interface ResilientClientLike {
  chat(request: unknown, options?: unknown): Promise<any>;
  stream(request: unknown, options?: unknown): AsyncIterableIterator<any>;
}

export interface ResilientProviderSettings {
  /** The client whose routes, retries, breakers and failover serve every call. */
  client: ResilientClientLike;
  /** The `provider` the AI SDK reports (default "resilient-llm"). */
  name?: string;
}

/** The language model for one route of the client's configuration. */
export interface ResilientLanguageModel {
  readonly specificationVersion: "v4";
  readonly provider: string;
  /** The route name. */
  readonly modelId: string;
  readonly supportedUrls: Record<string, RegExp[]>;
  doGenerate(options: any): PromiseLike<any>;
  doStream(options: any): PromiseLike<{ stream: ReadableStream<any>; request?: { body?: unknown } }>;
}

export interface ResilientProvider {
  /** The model for `route` (default "default"). */
  (route?: string): ResilientLanguageModel;
  languageModel(route?: string): ResilientLanguageModel;
  readonly specificationVersion: "v4";
}

/** A provider of language models over `settings.client`. */
export function createResilient(settings: ResilientProviderSettings): ResilientProvider;
