import type { FastifyInstance } from 'fastify';
import { openApiDocument } from '../openapi.js';
import { openApiAnswerSchema } from '../../wire/operations.js';
import { route } from '../route.js';

export function openApiRoutes(app: FastifyInstance): void {
  route(app, { method: 'GET', url: '/openapi.json', access: 'public', tenants: 'none', tag: 'operations', summary: 'This API\'s OpenAPI 3.1 document', response: openApiAnswerSchema }, () => openApiDocument());
}
