import { createAnthropic } from '@ai-sdk/anthropic';
import { generateText, stepCountIs, type ModelMessage } from 'ai';
import { defineAgent } from '../src/index.js'; // your agent: from 'dagent'
import { dagentModel, dagentTools } from '../src/ai-sdk/index.js'; // your agent: from 'dagent/ai-sdk'

// An agent of your own on the AI SDK: each model call durable (a retry replays it, unpaid), streamed to the
// task's `output` stream, priced and held to the task's budget, with dagent's tools in the loop.
const anthropic = createAnthropic({ baseURL: process.env.DAGENT_LLM_ANTHROPIC_BASE_URL });

export default defineAgent({
  name: 'research',
  capabilities: ['research'],
  models: ['anthropic/claude-sonnet-4-5'],
  async run(task, ctx) {
    const name = task.model ?? 'anthropic/claude-sonnet-4-5';
    const model = dagentModel(anthropic(name.replace(/^anthropic\//, '')), ctx, { name });
    const { tools, waiting, wait } = dagentTools(ctx);
    let messages: ModelMessage[] = [{ role: 'user', content: task.spec.prompt ?? 'No question was given: say so.' }];
    for (;;) {
      const result = await generateText({
        model, tools, messages, stopWhen: [stepCountIs(8), waiting], maxRetries: 0, abortSignal: ctx.signal,
        system: 'Research the question. Read upstream results with read_input; split big questions with spawn_subtasks.',
      });
      if (!waiting()) return { text: result.text, model: name };
      const done = await wait(); // ends the attempt until they completed (the next replays up to here), or has their outputs
      messages = [...messages, ...result.response.messages, { role: 'user', content: `Subtasks done: ${JSON.stringify(done)}` }];
    }
  },
});
