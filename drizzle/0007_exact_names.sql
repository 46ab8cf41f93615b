-- Keys, tags and type names compared byte for byte, trailing spaces included (binary, NO PAD).
-- utf8mb4_nopad_bin is MariaDB's name; on MySQL 8 the migrator runs this file with
-- utf8mb4_0900_bin in its place (src/db/migrate.ts). Both columns of tasks change in one ALTER,
-- so the table is rebuilt once.
ALTER TABLE `punctual_task_tags` MODIFY COLUMN `tag` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL;--> statement-breakpoint
ALTER TABLE `punctual_tasks` MODIFY COLUMN `task_key` varchar(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin, MODIFY COLUMN `type` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL;--> statement-breakpoint
ALTER TABLE `punctual_type_controls` MODIFY COLUMN `type` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL;
