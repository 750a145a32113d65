import { customAlphabet } from 'nanoid';

// Lowercase alphanumerics read well in terminals and URLs; 14 chars ≈ 72 bits, plenty per prefix.
const random = customAlphabet('0123456789abcdefghijklmnopqrstuvwxyz', 14);

export const newDagId = () => `dag_${random()}`;
export const newTaskId = () => `tsk_${random()}`;
export const newDeadLetterId = () => `dlq_${random()}`;
export const newTokenId = () => `tok_${random()}`;
export const newWebhookId = () => `whk_${random()}`;
