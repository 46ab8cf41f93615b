/** GET /auth/whoami: the role of the caller's token, so a client (the dashboard) can hide what it may not do. */
import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { ROLES } from '../roles.js';

const WhoAmI = Type.Object({
  role: Type.Union([Type.Literal(ROLES[0]), Type.Literal(ROLES[1]), Type.Literal(ROLES[2])], {
    description: 'read: lists, summary, metrics; write: also create, cancel, reschedule, retry; admin: everything',
  }),
});

export const authRoutes: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.get(
    '/auth/whoami',
    { schema: { summary: "The role of the caller's token", tags: ['operations'], response: { 200: WhoAmI } } },
    async (request) => ({ role: request.role ?? 'read' }),
  );
};
