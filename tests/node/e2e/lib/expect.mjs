// What the two test agents say, so the tests know the exact text to expect.
// Kept in step with tests/python/agui_agent.py (constants at its top) and
// tests/node/vercel-agent.mjs (which exports its own).

export {
  BACKGROUND_INPUT as VERCEL_BACKGROUND_INPUT,
  ECHO_PREFIX as VERCEL_ECHO_PREFIX,
  WEATHER_INPUT as VERCEL_WEATHER_INPUT,
  WEATHER_OUTPUT as VERCEL_WEATHER_OUTPUT,
  WEATHER_TEXT as VERCEL_WEATHER_TEXT,
} from '../../vercel-agent.mjs';

/** The Python agent's answer to anything without a scenario keyword. */
export const pyEcho = (said) => `你好，世界! 🎉👍🏽 You said: ${said}`;
export const PY_WEATHER_INPUT = { city: '北京' };
export const PY_WEATHER_RESULT = { city: '北京', temperature: 22, condition: 'sunny' };
export const PY_WEATHER_TEXT = '北京今天晴，气温 22°C。';
export const PY_BACKGROUND_INPUT = { color: '#ff0000' };
export const PY_CONFIRM_INPUT = { action: 'delete_file', path: '/tmp/report.txt' };
export const PY_REASONING = 'Let me think. The answer is 42.';
export const PY_THINK_TEXT = 'Thought about it: 42.';
export const PY_FINAL_STATE = { counter: 1, items: ['a', 'b'] };
export const PY_STATE_TEXT = 'State updated.';
export const PY_ERROR_TEXT = 'Working on it';
export const PY_ERROR_MESSAGE = 'the agent failed on purpose';
export const pyToolAnswer = (content) => `The tool said: ${content}. Anything else?`;
export const PY_CONFIRMED = 'Confirmed: the action was carried out.';
export const PY_STRAY_CALL_ID = 'call-never-streamed';

/** An AG-UI message's text, whether its content is a string or parts. */
export const aguiText = (content) => (typeof content === 'string' ? content : (content ?? []).map((p) => p.text ?? '').join(''));
/** A UI message's text parts, joined. */
export const uiText = (message) => message.parts.filter((p) => p.type === 'text').map((p) => p.text).join('');
