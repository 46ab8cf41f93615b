/** GET /auth/whoami: the role of the caller's token, so a client (the dashboard) can hide what it may not do. */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { WhoAmI } from '../../contract/auth.js';

export const authRoutes: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/auth/whoami',
    { schema: { summary: "The role of the caller's token", tags: ['operations'], response: { 200: WhoAmI } } },
    async (request) => ({ role: request.role ?? 'read', name: request.tokenName }),
  );
};
